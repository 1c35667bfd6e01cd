// What a repository's sandbox needs, from (in order) .factory/pipeline.json's
// `environment`, else devcontainer.json, else the files it holds; turned into
// setup steps, the key of the cached environment, and the egress the repository
// asks for (shown to the user, never granted by itself). Everything is read at
// the base commit and is untrusted.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { FactoryError } from '../../common/errors.js';
import { runGit } from '../git/host-git.js';
import { blobIds, readEntry, repoEntries, type RepoEntry } from '../git/repo-files.js';
import type { EnvironmentConfig } from './env-schema.js';
import { DEFAULT_KEY_FILES, DETECTION_FILES, detect, isNodeProject, packageManagerPackage, readPackageJson, type PackageJsonFacts } from './detect.js';
import { DEVCONTAINER_PATHS, MAX_DEVCONTAINER_BYTES, parseDevcontainer, type DevcontainerPlan } from './devcontainer.js';
import { requestsToRules, type EgressRule } from './egress-request.js';
import { guestMemory, type MemoryBounds } from './guest-memory.js';
import { DEFAULT_MEMORY_BOUNDS } from '../state/settings.js';
import { NODE_SPEC_FILES, NodeRegistry, specFromFile, type NodeChoice, type NodeSpec } from './node-version.js';
import { bashCommand, setupSteps, type NodeInstall, type SetupCommand, type SetupStep } from './setup-script.js';

export type { SetupStep } from './setup-script.js';

/** Bumped when the way a plan becomes a guest changes, so old layers are not reused (2: keyed on the tree). */
export const PLAN_FORMAT = 2;
/**
 * Folders a setup installs into inside the work tree, carried from a layer's old
 * repository into a task's fresh clone (at any depth, only where the clone has
 * nothing of that name): everything else of the old work tree and its .git goes.
 */
export const INSTALL_DIRS = ['node_modules', '.venv', 'venv'] as const;
const MAX_SMALL_FILE = 64 * 1024;
const MAX_PACKAGE_JSON = 1024 * 1024;

export interface EnvironmentPlan {
  source: 'pipeline.json' | 'devcontainer.json' | 'detected' | 'none';
  summary: string[];
  debianPackages: string[];
  /** `reason`: why this release, in words ("newest LTS satisfying >=18"). */
  node?: { spec: string; from: string; version: string; reason: string };
  steps: SetupStep[];
  env: Record<string, string>;
  keyFiles: Array<{ path: string; blob: string | null }>;
  egressRequests: EgressRule[];
  unsupported: string[];
  cacheKey: string;
  /** The commit the plan was made at and its tree: what the layer is keyed on and records. */
  commit: string;
  tree: string;
  /** Install folders a task on this plan's layer takes over from the layer (INSTALL_DIRS). */
  installDirs: string[];
  /** Guest memory for this repository's sandbox when it asked for some (held to the cap); else the user's default applies. */
  memoryMb?: number;
}

export interface PlanInput {
  repoPath: string;
  commit: string;
  /** The repository's .factory/pipeline.json; only its `environment` section is read here. */
  config: { environment?: EnvironmentConfig | undefined };
  imageVersion: string;
  /** Injected; the default asks the npm registry. */
  resolveNode?: (spec: string) => Promise<string>;
  /** Where Node and npm tarballs (and, without resolveNode, versions) come from; default the public npm registry. */
  registry?: Pick<NodeRegistry, 'chooseNode' | 'nodeDist' | 'npmFor' | 'packageDist'>;
  /** Who the repository is, for the cache key; default its real path on this computer. */
  repoIdentity?: string;
  /** The user's default and cap of guest memory (settings vmMemoryMb, vmMemoryMaxMb); default the settings' defaults. */
  memory?: MemoryBounds;
}

const defaultRegistry = new NodeRegistry();

async function readText(repoPath: string, path: string, entry: RepoEntry, max: number): Promise<string> {
  return (await readEntry(repoPath, path, entry, max)).toString('utf8');
}

export async function planEnvironment(input: PlanInput): Promise<EnvironmentPlan> {
  const { repoPath, commit, config } = input;
  const candidates = [...DEVCONTAINER_PATHS, ...NODE_SPEC_FILES, ...DETECTION_FILES];
  const entries = await repoEntries(repoPath, commit, candidates);
  const present = new Set([...entries].filter(([, e]) => e.kind === 'file').map(([p]) => p));
  const summary: string[] = [];
  const unsupported: string[] = [];

  let pkg: PackageJsonFacts | undefined;
  if (present.has('package.json')) pkg = readPackageJson(await readText(repoPath, 'package.json', entries.get('package.json')!, MAX_PACKAGE_JSON));

  // An environment that only sizes the guest leaves the setup to devcontainer.json or detection.
  const environment = config.environment && !onlyMemory(config.environment) ? config.environment : undefined;
  let devcontainer: DevcontainerPlan | undefined;
  const dcPath = DEVCONTAINER_PATHS.find((p) => entries.has(p));
  if (dcPath && !environment) {
    devcontainer = parseDevcontainer(dcPath, await readEntry(repoPath, dcPath, entries.get(dcPath)!, MAX_DEVCONTAINER_BYTES));
    unsupported.push(...devcontainer.unsupported);
  }

  let source: EnvironmentPlan['source'];
  let debianPackages: string[] = [];
  let rootCommands: SetupCommand[] = [];
  let agentCommands: SetupCommand[] = [];
  let env: Record<string, string> = {};
  let needsNode = present.has('package.json') && isNodeProject(present, pkg);
  if (environment) {
    source = 'pipeline.json';
    debianPackages = [...environment.packages];
    rootCommands = environment.rootSetup.map((c, i) => ({ label: `environment.rootSetup[${i}]: ${c}`, line: bashCommand(c) }));
    agentCommands = environment.setup.map((c, i) => ({ label: `environment.setup[${i}]: ${c}`, line: bashCommand(c) }));
    env = environment.env;
  } else if (devcontainer && (devcontainer.commands.length > 0 || Object.keys(devcontainer.env).length > 0)) {
    source = 'devcontainer.json';
    summary.push(...devcontainer.summary);
    const commands = devcontainer.commands.map((c) => ({ label: `${c.label}: ${c.line}`, line: c.line }));
    if (devcontainer.user === 'root') rootCommands = commands;
    else agentCommands = commands;
    env = devcontainer.env;
  } else {
    if (devcontainer) summary.push(`${devcontainer.path} has no command or containerEnv to run here; detected from the files instead`);
    let pyprojectHasProject = false;
    if (present.has('pyproject.toml')) {
      pyprojectHasProject = /^\s*\[project\]\s*$/m.test(await readText(repoPath, 'pyproject.toml', entries.get('pyproject.toml')!, MAX_PACKAGE_JSON));
    }
    const found = detect(present, pkg, pyprojectHasProject);
    debianPackages = found.debianPackages;
    agentCommands = found.commands.map((line) => ({ label: line, line }));
    summary.push(...found.summary);
    needsNode = found.needsNode;
    source = found.debianPackages.length + found.commands.length > 0 ? 'detected' : 'none';
  }

  const nodeSpec = await findNodeSpec(input, entries, pkg, needsNode);
  let node: EnvironmentPlan['node'];
  let nodeInstall: NodeInstall | undefined;
  if (nodeSpec) {
    const registry = input.registry ?? defaultRegistry;
    const choice: NodeChoice = input.resolveNode
      ? { version: await input.resolveNode(nodeSpec.spec), reason: `resolved from ${nodeSpec.spec}` }
      : await registry.chooseNode(nodeSpec.spec);
    const { version, reason } = choice;
    node = { ...nodeSpec, version, reason };
    nodeInstall = { version, reason, dist: await registry.nodeDist(version), npm: await registry.npmFor(version) };
    // packageManager pins the very release (and its hash): installed with Node, never a newer one of its major.
    const pm = pkg?.packageManager;
    if (pm?.version && pm.name === 'npm') {
      nodeInstall.npm = await registry.packageDist('npm', pm.version);
      if (pm.hash) nodeInstall.npmHash = pm.hash;
    } else if (pm?.version) {
      const name = packageManagerPackage(pm);
      nodeInstall.packageManager = {
        label: `${pm.name}@${pm.version}`, pkg: name, dist: await registry.packageDist(name, pm.version),
        ...(pm.hash ? { hash: pm.hash } : {}), hashOf: name === '@yarnpkg/cli-dist' ? 'bin/yarn.js' : 'tarball',
      };
    }
    summary.unshift(`Node ${version}: ${reason} (${nodeSpec.from})`);
    if (pm?.version) summary.splice(1, 0, `${pm.name} ${pm.version} from packageManager${pm.hash ? `, its ${pm.hash.algorithm} checked` : ''}`);
    if (source === 'none') source = 'detected';
  }
  if (debianPackages.length > 0) summary.push(`Debian: ${debianPackages.join(' ')}`);
  if (source === 'pipeline.json') summary.push(...[...rootCommands, ...agentCommands].map((c) => c.label));
  const memory = guestMemory(config.environment?.memoryMb, input.memory ?? DEFAULT_MEMORY_BOUNDS);
  if (memory.line) summary.push(memory.line);

  const steps = setupSteps({ debianPackages, node: nodeInstall, rootCommands, agentCommands, env });
  if (steps.length === 0) summary.push('nothing to set up');

  const keyPaths = environment?.cacheKeyFiles ?? DEFAULT_KEY_FILES.filter((p) => present.has(p));
  const ids = await blobIds(repoPath, commit, keyPaths);
  const keyFiles = keyPaths.map((path) => ({ path, blob: ids.get(path) ?? null }));
  const egressRequests = requestsToRules(environment?.egress ?? []);

  // The key is the whole tree, not only the lockfiles and the commands: setup runs code of the
  // repository (npm ci runs package.json scripts, a command may run any script, and a script may
  // read any file), so anything short of the tree lets another commit, say an untrusted branch,
  // plant its setup's results under a key a trusted commit also has. The price: a new tree runs
  // setup again. The repository is its path and its root commits: two clones at one path share
  // neither root commits nor, unless their files are the same, the tree.
  const identity = input.repoIdentity ?? realPath(repoPath);
  const [tree, roots] = await Promise.all([treeOf(repoPath, commit), rootCommits(repoPath, commit)]);
  const cacheKey = sha256(JSON.stringify({
    format: PLAN_FORMAT, image: input.imageVersion, repository: identity, roots, tree, source,
    steps: steps.map((s) => [s.name, s.user, s.script]), env, node: node?.version ?? null, keyFiles,
  }));
  return {
    source, summary, debianPackages, ...(node ? { node } : {}), steps, env, keyFiles, egressRequests, unsupported, cacheKey,
    commit, tree, installDirs: [...INSTALL_DIRS],
    ...(memory.requestedMb !== undefined ? { memoryMb: memory.memoryMb } : {}),
  };
}

async function treeOf(repoPath: string, commit: string): Promise<string> {
  const r = await runGit(['rev-parse', '--verify', '--end-of-options', `${commit}^{tree}`], { cwd: repoPath, timeoutMs: 15_000 });
  const tree = r.stdout.trim();
  if (r.code !== 0 || !/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(tree)) throw new FactoryError('GitFailed', `could not read the tree of ${commit}: ${r.stderr.trim().slice(0, 200)}`);
  return tree;
}

/** The commits without parents behind commit; the commit itself when the walk fails or takes too long (a narrower key, never a wider one). */
async function rootCommits(repoPath: string, commit: string): Promise<string[]> {
  const r = await runGit(['rev-list', '--max-parents=0', commit, '--'], { cwd: repoPath, timeoutMs: 30_000, maxStdoutBytes: 64 * 1024 });
  const roots = r.stdout.split('\n').filter(Boolean);
  if (r.code !== 0 || r.truncated || roots.length === 0) return [commit];
  return roots.sort();
}

function onlyMemory(e: EnvironmentConfig): boolean {
  const { memoryMb, packages, node, setup, rootSetup, cacheKeyFiles, env, egress } = e;
  return memoryMb !== undefined && packages.length + setup.length + rootSetup.length + egress.length + Object.keys(env).length === 0 && node === undefined && cacheKeyFiles === undefined;
}

/** pipeline.json's environment.node, else the version files, else engines.node; a package.json alone means the newest LTS. */
async function findNodeSpec(input: PlanInput, entries: Map<string, RepoEntry>, pkg: PackageJsonFacts | undefined, needsNode: boolean): Promise<NodeSpec | undefined> {
  const configured = input.config.environment?.node;
  if (configured) return { spec: configured, from: 'pipeline.json environment.node' };
  for (const file of NODE_SPEC_FILES) {
    const entry = entries.get(file);
    if (!entry) continue;
    const spec = specFromFile(file, await readText(input.repoPath, file, entry, MAX_SMALL_FILE));
    if (spec) return { spec, from: file };
  }
  // engines.node of a package.json that is only metadata (a C library's) does not make a Node project.
  if (pkg?.engineNode !== undefined && needsNode) {
    specFromFile('package.json engines.node', pkg.engineNode);
    return { spec: pkg.engineNode, from: 'package.json engines.node' };
  }
  return needsNode ? { spec: 'lts/*', from: 'package.json, no version named' } : undefined;
}

function realPath(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch (err) {
    throw new FactoryError('NotAGitRepository', `cannot resolve ${p}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function sha256(s: string): string {
  return crypto.createHash('sha256').update(s).digest('hex');
}
