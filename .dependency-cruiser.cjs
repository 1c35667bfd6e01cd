// The layering rules of the code base (docs/DESIGN.md, "Layering"), checked by
// `npm test` (the "layering" step of scripts/test.mjs). A rule broken here fails
// the run with the importing file, the imported one and the rule's reason.

// The folders of main/, lowest first: a folder imports only folders before it
// (and common/), never one after it, so no two folders import each other. A
// new folder of main/ must be given its place here (rule main-folder-has-a-place).
const MAIN_ORDER = [
  'streams', // waiting on Node streams
  'log', // the app's log
  'ssh', // keys and the SSH client of a sandbox
  'state', // persistence: paths, settings, the task store
  'terminal', // terminal sessions and their logs
  'git', // every git the host runs
  'guest', // what runs in the guest and how the host speaks to it
  'environment', // what a repository's sandbox needs
  'vm', // images, layers, QEMU: process, snapshot, identity, first shell
  'credentials', // broker, proxy, leak check
  'exec', // one command in a sandbox
  'pipeline', // stages and agents
  'pullback', // the result back to the host
  'sessions', // agent sessions on the host
  'sandbox', // what a running sandbox is to the rest of the app
  'pool', // warm VMs waiting for a task
  'remote', // sandbox hosts over SSH
  'tasks', // the task's life
  'fanout', // a task run N ways from one preparation
  'instance', // one app per data folder, and how its clients reach it
  'cli', // the factory command
  'app.ts', // the composition root
  'host', // Electron, web and socket hosts of the app
];

const mainPath = (name) => (name.endsWith('.ts') ? `main/${name.replace(/\./g, '\\.')}$` : `main/${name}/`);
const folderOrder = MAIN_ORDER.slice(0, -1).map((name, i) => ({
  name: `main-order-${name}`,
  comment: `main/ folders depend downwards only (MAIN_ORDER): ${name} imports nothing of ${MAIN_ORDER.slice(i + 1).join(', ')}.`,
  severity: 'error',
  from: { path: `^${mainPath(name)}` },
  to: { path: `^(${MAIN_ORDER.slice(i + 1).map(mainPath).join('|')})` },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...folderOrder,
    {
      name: 'main-folder-has-a-place',
      comment: 'Every folder (and file) directly in main/ has its place in MAIN_ORDER.',
      severity: 'error',
      from: { path: '^main/', pathNot: `^(${MAIN_ORDER.map(mainPath).join('|')})` },
      to: {},
    },
    {
      name: 'renderer-no-node',
      comment: 'The renderer runs in a sandboxed page: no Node built-ins, no Electron, no host-only packages.',
      severity: 'error',
      from: { path: '^renderer/' },
      to: {
        dependencyTypes: ['core'],
      },
    },
    {
      name: 'renderer-no-host-packages',
      comment: 'The renderer reaches the host only through the typed bridge.',
      severity: 'error',
      from: { path: '^renderer/' },
      to: { path: '(^|/)node_modules/(electron|ssh2|node-pty|ws|@napi-rs|conf|env-paths)/' },
    },
    {
      name: 'renderer-no-main',
      comment: 'The renderer imports common/ and itself, never the host or the preload.',
      severity: 'error',
      from: { path: '^renderer/' },
      to: { path: '^(main|preload)/' },
    },
    {
      name: 'common-imports-nothing-of-ours',
      comment: 'common/ is the contract every process shares: it imports nothing of ours outside common/, and no Node.',
      severity: 'error',
      from: { path: '^common/' },
      to: { path: '^(main|renderer|preload|test|scripts)/' },
    },
    {
      name: 'common-no-node',
      comment: 'common/ runs in every process, the renderer included.',
      severity: 'error',
      from: { path: '^common/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'main-no-cycles',
      comment: 'Capabilities in main/ depend on each other in one direction.',
      severity: 'error',
      from: { path: '^main/' },
      to: { circular: true },
    },
    {
      name: 'only-host-knows-electron',
      comment: 'Electron code stays thin in main/host/electron/ and preload/.',
      severity: 'error',
      from: { path: '^(main|common|renderer)/', pathNot: '^main/host/electron/' },
      to: { path: '(^|/)node_modules/electron/' },
    },
    {
      name: 'only-app-wires-services',
      comment: 'app.ts is the composition root: no capability imports it; the hosts reach services only through it.',
      severity: 'error',
      from: { path: '^main/', pathNot: '^main/(host/|app\\.ts$)' },
      to: { path: '^main/app\\.ts$' },
    },
    {
      name: 'hosts-use-the-app-only',
      comment:
        'The Electron and web hosts serve the app built by app.ts; they construct no service themselves. ' +
        "The packaged binary is also the factory CLI, so it may start the CLI's entry (a client of the app) and read its " +
        'arguments (cli-route); it holds the data folder with the instance lock and listens where clients look (main/instance/).',
      severity: 'error',
      from: { path: '^main/host/' },
      to: { path: '^main/', pathNot: '^main/(host/|app\\.ts$|state/paths\\.ts$|cli/run-cli\\.ts$|cli/cli-route\\.ts$|instance/)' },
    },
    {
      name: 'pullback-not-pipeline',
      comment: 'Pull-back and the pipeline share main/git and main/guest, not each other.',
      severity: 'error',
      from: { path: '^main/pullback/' },
      to: { path: '^main/pipeline/' },
    },
    {
      name: 'pipeline-not-pullback',
      comment: 'Pull-back and the pipeline share main/git and main/guest, not each other.',
      severity: 'error',
      from: { path: '^main/pipeline/' },
      to: { path: '^main/pullback/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|test-results)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.test.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
