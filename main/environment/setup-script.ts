// The setup of a sandbox as bash scripts, one per visible step: the proxy
// settings of every tool that ignores HTTP(S)_PROXY, Debian packages, Node, the
// repository's root commands, then the project's own install as the agent user.
// Every value that came from the repository is validated before a script is made
// and shell-quoted inside it; the repository's commands run as they are, but only
// ever in the guest and each as one quoted word (`bash -c '<command>'`), so no
// command can change the script around it.
import { shellQuote } from '../../common/shell-quote.js';
import { FactoryError } from '../../common/errors.js';
import { GUEST_NO_PROXY, GUEST_PROXY_ENV, GUEST_PROXY_URL } from '../guest/guest-proxy.js';
import { GUEST_REPO_DIR } from '../guest/guest-shell.js';
import { NODE_GYP_PACKAGES } from './detect.js';
import { DEBIAN_PACKAGE_NAME } from './env-schema.js';
import type { PackageDist } from './node-version.js';

export interface SetupStep {
  name: string;
  user: 'root' | 'agent';
  script: string;
  /** One line for the terminal and the board: what this step does. */
  display: string;
  timeoutSeconds: number;
}

export interface SetupCommand {
  /** Where it came from, shown before it runs: "postCreateCommand", "environment.setup[1]", "npm ci". */
  label: string;
  /** A shell line (already quoted where it needs to be). */
  line: string;
}

/** A hash the repository names for a download (packageManager's "+sha512.<hex>"), checked in the guest. */
export interface NamedHash {
  algorithm: 'sha1' | 'sha224' | 'sha256' | 'sha384' | 'sha512';
  hex: string;
}

/** The package manager package.json pins, installed from its registry tarball next to npm. */
export interface PinnedPackageManager {
  /** "pnpm@10.14.0-0", as written (without the hash). */
  label: string;
  /** The registry package: pnpm, yarn, @yarnpkg/cli-dist. */
  pkg: string;
  dist: PackageDist & { bin: Record<string, string> };
  hash?: NamedHash;
  /** What the hash is of: the tarball, or for Yarn 2+ its bin/yarn.js (corepack fetches that file, not the tarball). */
  hashOf: 'tarball' | 'bin/yarn.js';
}

export interface NodeInstall {
  version: string;
  dist: PackageDist;
  npm: PackageDist;
  /** packageManager's hash when it pins npm itself. */
  npmHash?: NamedHash;
  packageManager?: PinnedPackageManager;
  /** Why this release ("newest LTS satisfying >=18"), said before it is downloaded. */
  reason?: string;
}

export interface SetupInput {
  debianPackages: string[];
  node?: NodeInstall;
  rootCommands: SetupCommand[];
  agentCommands: SetupCommand[];
  env: Record<string, string>;
}

const HEADER = ['#!/bin/bash', 'set -euo pipefail'];

/** A line a step prints to say why it failed; the host shows the last one on the setup card. */
export const REASON_MARK = '✗ ';
/** `fail "<why>"`: prints the reason line and ends the step. */
export const FAIL_FUNCTION = `fail() { printf '\\n${REASON_MARK}%s\\n' "$1"; exit 1; }`;
/** The first non-blank line of a shell variable's text. */
const firstLine = (name: string): string => `$(printf '%s\\n' "$${name}" | sed -n '/[^[:space:]]/{p;q}')`;

function say(message: string): string {
  return `printf '%s\\n' ${shellQuote(`==> ${message}`)}`;
}

function exports(env: Record<string, string>): string[] {
  return Object.entries(env).map(([k, v]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new FactoryError('InvalidInput', `environment variable name ${JSON.stringify(k).slice(0, 80)} is not a shell name`);
    return `export ${k}=${shellQuote(v)}`;
  });
}

function script(lines: string[]): string {
  return [...HEADER, ...exports(GUEST_PROXY_ENV), ...lines, ''].join('\n');
}

/** A sha512 SRI string as the hex sha512sum prints. */
export function sha512Hex(integrity: string): string {
  if (!/^sha512-[A-Za-z0-9+/]{86}==$/.test(integrity)) throw new FactoryError('InvalidData', `not a sha512 integrity: ${integrity.slice(0, 40)}`);
  return Buffer.from(integrity.slice(7), 'base64').toString('hex');
}

function proxyStep(): SetupStep {
  const apt = [`Acquire::http::Proxy "${GUEST_PROXY_URL}";`, `Acquire::https::Proxy "${GUEST_PROXY_URL}";`];
  // No update check or funding notice: one request less each run, and nothing to act on in a sandbox.
  const npmrc = [`proxy=${GUEST_PROXY_URL}`, `https-proxy=${GUEST_PROXY_URL}`, `noproxy=${GUEST_NO_PROXY}`, 'update-notifier=false', 'fund=false'];
  const lines = [
    say(`apt, npm, pip and git use the proxy at ${GUEST_PROXY_URL}`),
    'install -d -m 0755 /etc/apt/apt.conf.d /usr/local/etc',
    `printf '%s\\n' ${apt.map(shellQuote).join(' ')} > /etc/apt/apt.conf.d/80factory-proxy`,
    // npm's global config: /usr/local/etc/npmrc for the Node this setup installs, /etc/npmrc for Debian's npm.
    `for f in /usr/local/etc/npmrc /etc/npmrc; do printf '%s\\n' ${npmrc.map(shellQuote).join(' ')} > "$f"; done`,
    `printf '%s\\n' '[global]' ${shellQuote(`proxy = ${GUEST_PROXY_URL}`)} > /etc/pip.conf`,
    `git config --system http.proxy ${shellQuote(GUEST_PROXY_URL)}`,
  ];
  return { name: 'proxy settings', user: 'root', script: script(lines), display: `proxy settings for apt, npm, pip and git (${GUEST_PROXY_URL})`, timeoutSeconds: 60 };
}

function debianStep(packages: string[]): SetupStep {
  for (const p of packages) {
    // Checked again here: a name is the one repository value that reaches apt's command line.
    if (!DEBIAN_PACKAGE_NAME.test(p)) throw new FactoryError('InvalidInput', `not a Debian package name: ${JSON.stringify(p).slice(0, 80)}`);
  }
  const list = packages.map(shellQuote).join(' ');
  const lines = [
    'export DEBIAN_FRONTEND=noninteractive',
    say('apt-get update'),
    'apt-get update',
    say(`apt-get install ${packages.join(' ')}`),
    `apt-get install -y --no-install-recommends ${list}`,
  ];
  return { name: 'Debian packages', user: 'root', script: script(lines), display: `Debian: ${packages.join(' ')}`, timeoutSeconds: 1800 };
}

const HASH_PROGRAM: Record<NamedHash['algorithm'], string> = { sha1: 'sha1sum', sha224: 'sha224sum', sha256: 'sha256sum', sha384: 'sha384sum', sha512: 'sha512sum' };

function hashCheck(hash: NamedHash, file: string, why: string): string {
  if (!/^[0-9a-f]{40,128}$/.test(hash.hex)) throw new FactoryError('InvalidInput', 'not a hex hash');
  return `printf '%s  %s\\n' ${shellQuote(hash.hex)} "${file}" | ${HASH_PROGRAM[hash.algorithm]} --check --quiet - || fail ${shellQuote(why)}`;
}

/** Downloads a registry tarball: curl's own error as the reason when it fails, then the registry's sha512 checked. */
function fetchChecked(dist: PackageDist, file: string, what: string): string[] {
  return [
    say(`download ${dist.url}`),
    `if ! err=$(curl --fail -sS --retry 3 -o "$tmp/${file}" ${shellQuote(dist.url)} 2>&1); then printf '%s\\n' "$err"; fail ${shellQuote(`could not download ${what} from the npm registry: `)}"${firstLine('err')}"; fi`,
    `printf '%s  %s\\n' ${shellQuote(sha512Hex(dist.integrity))} "$tmp/${file}" | sha512sum --check --quiet - || fail ${shellQuote(`${what}: the download is not the file the registry lists (sha512 differs)`)}`,
  ];
}

/** Sonames official Node builds link that a minimal Debian may lack, and the package of each. */
export const NODE_RUNTIME_LIBRARIES: Readonly<Record<string, string>> = {
  'libatomic.so.1': 'libatomic1',
  'libstdc++.so.6': 'libstdc++6',
  'libgcc_s.so.1': 'libgcc-s1',
};

/** Installs the libraries `node` misses (per ldd) and checks it starts; `node` is a parameter for its test. */
export function runtimeLibraries(version: string, node = '/usr/local/bin/node'): string[] {
  const cases = Object.entries(NODE_RUNTIME_LIBRARIES).map(([lib, pkg]) => `    ${shellQuote(lib)}) pkgs="$pkgs ${pkg}" ;;`);
  return [
    // Node 26's build links libatomic.so.1: the base image carries it, an image without it gets it from Debian.
    // Ask ldd, install only what is missing.
    `missing=$(ldd ${shellQuote(node)} 2>/dev/null | awk '/=> not found/ {print $1}' | sort -u | tr '\\n' ' ' || true)`,
    'pkgs=""',
    'for lib in $missing; do',
    '  case "$lib" in',
    ...cases,
    '  esac',
    'done',
    'if [ -n "$pkgs" ]; then',
    `  printf '==> Node ${version} needs %s: apt-get install%s\\n' "\${missing% }" "$pkgs"`,
    '  export DEBIAN_FRONTEND=noninteractive',
    `  if ! { apt-get update && apt-get install -y --no-install-recommends $pkgs; }; then fail "could not install$pkgs, which Node ${version} needs"; fi`,
    'fi',
    // Nothing goes on with a Node that does not start; the reason names the library the loader missed.
    `if ! out=$(${shellQuote(node)} --version 2>&1); then`,
    `  printf '%s\\n' "$out"`,
    `  lib=$(printf '%s\\n' "$out" | sed -n 's/.*error while loading shared libraries: \\([^:]*\\):.*/\\1/p' | head -n 1)`,
    `  if [ -n "$lib" ]; then fail "Node ${version} does not start: $lib is missing (error while loading shared libraries)"; fi`,
    `  fail "Node ${version} does not start: ${firstLine('out')}"`,
    'fi',
  ];
}

function packageManagerLines(pm: PinnedPackageManager): string[] {
  const dir = `/usr/local/lib/node_modules/${pm.pkg}`;
  const lines = [...fetchChecked(pm.dist, 'pm.tgz', `${pm.pkg} ${pm.dist.version}`)];
  const mismatch = `${pm.label}: the download does not match the ${pm.hash?.algorithm ?? ''} packageManager in package.json names`;
  if (pm.hash && pm.hashOf === 'tarball') lines.push(hashCheck(pm.hash, '$tmp/pm.tgz', mismatch));
  lines.push(
    say(`install ${pm.label} (packageManager in package.json) in ${dir}`),
    `rm -rf ${shellQuote(dir)} && install -d ${shellQuote(dir)}`,
    `tar -xzf "$tmp/pm.tgz" -C ${shellQuote(dir)} --strip-components=1 --no-same-owner`,
  );
  if (pm.hash && pm.hashOf === 'bin/yarn.js') lines.push(hashCheck(pm.hash, `${dir}/bin/yarn.js`, mismatch));
  for (const [name, target] of Object.entries(pm.dist.bin)) {
    lines.push(`chmod 0755 ${shellQuote(`${dir}/${target}`)}`, `ln -sfn ${shellQuote(`${dir}/${target}`)} ${shellQuote(`/usr/local/bin/${name}`)}`);
  }
  const first = Object.keys(pm.dist.bin)[0]!;
  lines.push(`if ! out=$(${shellQuote(`/usr/local/bin/${first}`)} --version 2>&1); then printf '%s\\n' "$out"; fail ${shellQuote(`${pm.label} does not run: `)}"${firstLine('out')}"; fi`, `printf '${first} %s\\n' "$out"`);
  return lines;
}

/**
 * node-gyp builds against the installed headers instead of downloading them (nodejs.org is not
 * reachable). Every SSH session and agent command in the sandbox has
 * npm_package_config_node_gyp_nodedir (GUEST_NODE_GYP_ENV), which node-gyp reads from 11.4 on.
 * An npm bundling an older one gets nodedir from npmrc instead (npm 11.2 and later warn about
 * that line: "will stop working"), and so do pnpm and Yarn, whose own node-gyp may be older.
 */
export function nodeGypHeaders(opts: { npmOnly: boolean; npmDir?: string; npmrc?: string }): string[] {
  const npmrc = shellQuote(opts.npmrc ?? '/usr/local/etc/npmrc');
  const line = `printf '%s\\n' 'nodedir=/usr/local' >> ${npmrc}`;
  if (!opts.npmOnly) return [line];
  const gyp = shellQuote(`${opts.npmDir ?? '/usr/local/lib/node_modules/npm'}/node_modules/node-gyp/lib/node-gyp.js`);
  return [`if ! grep -qs npm_package_config_node_gyp_ ${gyp}; then ${line}; fi`];
}

function nodeStep(node: NodeInstall): SetupStep {
  const lines = [
    FAIL_FUNCTION,
    'tmp=$(mktemp -d)',
    `trap 'rm -rf "$tmp"' EXIT`,
    ...(node.reason ? [say(`Node ${node.version}: ${node.reason}`)] : []),
    ...fetchChecked(node.dist, 'node.tgz', `Node ${node.version}`),
    say('install /usr/local/bin/node and its headers'),
    // Straight into place: the ~120 MB binary written once, not extracted then copied (2 s under emulation).
    'rm -rf /usr/local/include/node && install -d /usr/local/bin /usr/local/include',
    'tar -xzf "$tmp/node.tgz" -C /usr/local --strip-components=1 --no-same-owner package/bin/node package/include/node',
    'chmod 0755 /usr/local/bin/node',
    ...runtimeLibraries(node.version),
    ...fetchChecked(node.npm, 'npm.tgz', `npm ${node.npm.version}`),
    ...(node.npmHash ? [hashCheck(node.npmHash, '$tmp/npm.tgz', `npm@${node.npm.version}: the download does not match the ${node.npmHash.algorithm} packageManager in package.json names`)] : []),
    say(`install npm ${node.npm.version} in /usr/local/lib/node_modules/npm`),
    'rm -rf /usr/local/lib/node_modules/npm && install -d /usr/local/lib/node_modules/npm',
    'tar -xzf "$tmp/npm.tgz" -C /usr/local/lib/node_modules/npm --strip-components=1 --no-same-owner',
    'ln -sfn ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm',
    'ln -sfn ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx',
    ...nodeGypHeaders({ npmOnly: !node.packageManager }),
    ...(node.packageManager ? packageManagerLines(node.packageManager) : []),
    'printf "node %s, npm %s\\n" "$(/usr/local/bin/node --version)" "$(/usr/local/bin/npm --version)"',
  ];
  const pm = node.packageManager ? `, ${node.packageManager.label}` : '';
  return { name: `Node ${node.version}`, user: 'root', script: script(lines), display: `Node ${node.version} with npm ${node.npm.version}${pm}`, timeoutSeconds: 900 };
}

function commandsScript(commands: SetupCommand[], env: Record<string, string>): string {
  const lines = [...exports(env), `cd ${shellQuote(GUEST_REPO_DIR)}`];
  for (const c of commands) lines.push(say(c.label), c.line);
  return script(lines);
}

/** The steps of a plan, in the order they run; none when there is nothing to set up. */
export function setupSteps(input: SetupInput): SetupStep[] {
  const work = input.debianPackages.length + input.rootCommands.length + input.agentCommands.length + (input.node ? 1 : 0);
  if (work === 0) return [];
  const steps = [proxyStep()];
  if (input.debianPackages.length > 0) steps.push(debianStep(input.debianPackages));
  if (input.node) steps.push(nodeStep(input.node));
  if (input.rootCommands.length > 0) {
    steps.push({
      name: 'root setup', user: 'root', script: commandsScript(input.rootCommands, input.env),
      display: input.rootCommands.map((c) => c.label).join(', '), timeoutSeconds: 1800,
    });
  }
  if (input.agentCommands.length > 0) {
    steps.push({
      name: 'project setup', user: 'agent', script: commandsScript(input.agentCommands, input.env),
      display: input.agentCommands.map((c) => c.label).join(', '), timeoutSeconds: 3600,
    });
  }
  return steps;
}

/** A repository's own command string as one line: run by bash, as one quoted word. */
export function bashCommand(command: string): string {
  return `bash -c ${shellQuote(command)}`;
}

// Progress a package manager redraws (spinners, "Progress: resolved 12, reused 3 ..."): frames, never a cause.
const PROGRESS_LINE = /^(?:[\u2800-\u28ff◐◓◑◒|/\\.·•\s-]*|[\u2800-\u28ff◐◓◑◒] .*|progress: resolved \d.*|\d{1,3}% .*|\[[#=>.\s-]*\].*)$/i;
// The first line that says what went wrong, in the words of npm, pnpm, yarn, corepack, curl, apt, node.
const CAUSE_LINE = /^(?:ERR_PNPM_\w+|ERROR\b|npm (?:ERR!|error)|error\b|(?:\w*Error|Internal Error|Usage Error)\b:?|fatal:|E: |curl: \(\d+\)|YN\d{4}:.*(?:error|failed)|➤ YN\d{4})/i;

/** What node-gyp says when a tool it builds with is missing (seen with node-gyp 12.4 under npm 11.19; the lines are node-gyp's own, whoever runs it). */
const NODE_GYP_MISSING: Array<[RegExp, string]> = [
  [/gyp ERR! .*Could not find any Python installation|gyp ERR! find Python .*could not be run/, 'no Python'],
  [/gyp ERR! stack Error: not found: make\b/, 'no make'],
  [/make(?:\[\d+\])?: (?:cc|gcc|g\+\+|c\+\+): (?:No such file or directory|[Cc]ommand not found)/, 'no C/C++ compiler'],
];

/**
 * A native addon of a dependency that node-gyp could not build for want of its tools (no
 * prebuilt binary came, or the package has none): which tool, which package, and the line
 * that gives the sandbox the tools. Setup installs them by itself only for the repository's
 * own binding.gyp (detect.ts): a dependency's addon is known only once its install runs.
 */
function nodeGypToolchainReason(lines: string[]): string | undefined {
  const missing = NODE_GYP_MISSING.find(([re]) => lines.some((l) => re.test(l)))?.[1];
  if (!missing) return undefined;
  // "gyp ERR! cwd /work/repo/node_modules/<name>" (or npm's "npm error path …"): the package being built.
  const where = lines.map((l) => /(?:gyp ERR! cwd|npm (?:error|ERR!) path) (\S*\/node_modules\/(?:@[^/\s]+\/)?[^/\s]+)\/?$/.exec(l)?.[1]).find(Boolean);
  const name = where?.replace(/^.*\/node_modules\//, '');
  const packages = NODE_GYP_PACKAGES.map((p) => JSON.stringify(p)).join(', ');
  return `node-gyp could not build ${name ?? 'a native addon'}: ${missing} in the sandbox. Add {"environment": {"packages": [${packages}]}} to .factory/pipeline.json`;
}

/**
 * Why a setup step failed, in one line for the setup card, from the end of the
 * setup's output (escapes already removed): the step's own reason line when it
 * printed one, else the tool node-gyp lacked, else the library the loader missed,
 * else the first line of the failing step's output that names a cause. Spinner and
 * progress frames are skipped; undefined when nothing says why.
 */
export function setupFailureReason(tail: string): string | undefined {
  const lastStep = tail.lastIndexOf('\n▶ ');
  const lines = tail
    .slice(lastStep >= 0 ? lastStep + 1 : 0)
    .split('\n')
    .map((l) => l.replace(/\s+/g, ' ').trim())
    .filter((l) => l.length > 0 && !l.startsWith('▶ ') && !/ failed \(exit status \d+\)$/.test(l) && !PROGRESS_LINE.test(l));
  const cap = (l: string): string => (l.length > 240 ? `${l.slice(0, 239)}…` : l);
  const own = lines.filter((l) => l.startsWith(REASON_MARK.trim())).pop();
  if (own) return cap(own.slice(REASON_MARK.trim().length).trim());
  const gyp = nodeGypToolchainReason(lines);
  if (gyp) return cap(gyp);
  const lib = lines.map((l) => /error while loading shared libraries: ([^\s:]+)/.exec(l)?.[1]).find(Boolean);
  if (lib) return cap(`${lib} is missing in the sandbox (error while loading shared libraries)`);
  const cause = lines.find((l) => CAUSE_LINE.test(l));
  return cause ? cap(cause) : undefined;
}
