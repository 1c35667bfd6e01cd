// What a repository needs when it says nothing itself: found from the files it
// holds at the base commit. Each finding is a Debian package set and the
// project's own install command (run as the agent user), with the files whose
// content keys the cached environment.
import semver from 'semver';
import { shellQuote } from '../../common/shell-quote.js';
import { FactoryError } from '../../common/errors.js';

/** Every file detection and the node spec look at (one lookup at the base commit). */
export const DETECTION_FILES = [
  'package.json', 'package-lock.json', 'npm-shrinkwrap.json', 'pnpm-lock.yaml', 'yarn.lock',
  'requirements.txt', 'pyproject.toml', 'go.mod', 'go.sum', 'Cargo.toml', 'Cargo.lock',
  'Makefile', 'makefile', 'GNUmakefile',
  // A C library's tests may have a Makefile of their own (uthash: `cd tests && make`).
  'tests/Makefile', 'test/Makefile',
  // A Node addon of its own: npm's install runs `node-gyp rebuild` for it.
  'binding.gyp',
] as const;

/** Files that key the environment cache by default, when present. */
export const DEFAULT_KEY_FILES = [
  'package.json', 'package-lock.json', 'npm-shrinkwrap.json', 'pnpm-lock.yaml', 'yarn.lock',
  'requirements.txt', 'pyproject.toml', 'go.mod', 'go.sum', 'Cargo.toml', 'Cargo.lock',
] as const;

export interface PackageManagerSpec {
  name: 'npm' | 'pnpm' | 'yarn';
  major: number;
  /** The exact version when packageManager names one ("pnpm@10.14.0-0"); corepack accepts nothing else. */
  version?: string;
  /** Corepack's "+sha512.<hex>" suffix: the hash of the file it downloads. */
  hash?: { algorithm: 'sha1' | 'sha224' | 'sha256' | 'sha384' | 'sha512'; hex: string };
}

export interface PackageJsonFacts {
  engineNode?: string;
  /** "pnpm@9.1.0" → { name: 'pnpm', major: 9, version: '9.1.0' }. */
  packageManager?: PackageManagerSpec;
  /** Whether it has scripts or dependencies; without either, package.json is metadata (a C library's, say). */
  hasScriptsOrDependencies: boolean;
}

const HASH_HEX_LENGTH = { sha1: 40, sha224: 56, sha256: 64, sha384: 96, sha512: 128 } as const;

/** The facts of package.json this app uses; junk in the fields it reads is refused naming the field. */
export function readPackageJson(text: string): PackageJsonFacts {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new FactoryError('InvalidInput', `package.json: not valid JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new FactoryError('InvalidInput', 'package.json: (top level): expected object');
  const obj = json as Record<string, unknown>;
  const nonEmpty = (v: unknown): boolean => typeof v === 'object' && v !== null && Object.keys(v).length > 0;
  const facts: PackageJsonFacts = {
    hasScriptsOrDependencies: ['scripts', 'dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies'].some((k) => nonEmpty(obj[k])),
  };
  const engines = obj.engines;
  if (typeof engines === 'object' && engines !== null && typeof (engines as Record<string, unknown>).node === 'string') {
    facts.engineNode = (engines as Record<string, string>).node;
  }
  if (obj.packageManager !== undefined) {
    const m = typeof obj.packageManager === 'string' ? /^(npm|pnpm|yarn)@((\d{1,3})\.[^\s+]*)(?:\+(sha1|sha224|sha256|sha384|sha512)\.([0-9a-f]+))?$/.exec(obj.packageManager) : null;
    if (!m) throw new FactoryError('InvalidInput', 'packageManager: expected "npm@<version>", "pnpm@<version>" or "yarn@<version>" in package.json');
    const pm: PackageManagerSpec = { name: m[1] as PackageManagerSpec['name'], major: Number(m[3]) };
    // Only a full version is pinned (what corepack accepts); "pnpm@9.x" keeps the newest of its major.
    if (/^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/.test(m[2]!) && semver.valid(m[2]!)) pm.version = m[2]!;
    if (m[4]) {
      const algorithm = m[4] as keyof typeof HASH_HEX_LENGTH;
      if (m[5]!.length !== HASH_HEX_LENGTH[algorithm] || !pm.version) throw new FactoryError('InvalidInput', `packageManager: the ${algorithm} hash must be ${HASH_HEX_LENGTH[algorithm]} hex digits after an exact version`);
      pm.hash = { algorithm, hex: m[5]! };
    }
    facts.packageManager = pm;
  }
  return facts;
}

export interface Detected {
  debianPackages: string[];
  /** Shell lines run as the agent user in the repository, in order. */
  commands: string[];
  summary: string[];
  /** True when the project needs Node (package.json). */
  needsNode: boolean;
}

/** What node-gyp builds an addon with: gyp (Python), make, and g++ to link even a C addon. */
export const NODE_GYP_PACKAGES = ['python3', 'make', 'g++'] as const;

/** `present` holds the DETECTION_FILES found; `pyprojectHasProject` whether pyproject.toml has a [project] table. */
export function detect(present: ReadonlySet<string>, pkg: PackageJsonFacts | undefined, pyprojectHasProject: boolean): Detected {
  const out: Detected = { debianPackages: [], commands: [], summary: [], needsNode: false };
  const add = (...names: string[]): void => {
    for (const n of names) if (!out.debianPackages.includes(n)) out.debianPackages.push(n);
  };
  if (present.has('package.json') && !isNodeProject(present, pkg)) {
    out.summary.push('package.json has no scripts and no dependencies: not set up as a Node project');
  } else if (present.has('package.json')) {
    out.needsNode = true;
    const pm = pkg?.packageManager;
    const pinned = pm?.version ? ` ${pm.version}` : '';
    const lock = ['package-lock.json', 'npm-shrinkwrap.json'].find((f) => present.has(f));
    if (present.has('pnpm-lock.yaml') || pm?.name === 'pnpm') {
      const major = pm?.name === 'pnpm' ? pm.major : 9;
      const frozen = present.has('pnpm-lock.yaml') ? ' --frozen-lockfile' : '';
      // A pinned pnpm is installed with Node (setup-script.ts): the very version named, so it never switches itself.
      out.commands.push(pm?.name === 'pnpm' && pm.version ? `pnpm install${frozen}` : `npm exec --yes --package=${shellQuote(`pnpm@${major}`)} -- pnpm install${frozen}`);
      out.summary.push(`pnpm ${pm?.name === 'pnpm' && pm.version ? pm.version : major} install${frozen} (${present.has('pnpm-lock.yaml') ? 'pnpm-lock.yaml' : 'packageManager'})`);
    } else if (present.has('yarn.lock') || pm?.name === 'yarn') {
      const major = pm?.name === 'yarn' ? pm.major : 1;
      const locked = present.has('yarn.lock');
      // Yarn 2+ is published as @yarnpkg/cli-dist; its lockfile flag is --immutable.
      const [pkgName, flag] = major >= 2 ? [`@yarnpkg/cli-dist@${major}`, ' --immutable'] : [`yarn@${major}`, ' --frozen-lockfile'];
      const bin = major >= 2 ? 'yarnpkg' : 'yarn';
      out.commands.push(pm?.name === 'yarn' && pm.version ? `yarn install${locked ? flag : ''}` : `npm exec --yes --package=${shellQuote(pkgName)} -- ${bin} install${locked ? flag : ''}`);
      out.summary.push(`yarn ${pm?.name === 'yarn' && pm.version ? pm.version : major} install${locked ? flag : ''} (${locked ? 'yarn.lock' : 'packageManager'})`);
    } else if (lock) {
      out.commands.push('npm ci');
      out.summary.push(`npm${pm?.name === 'npm' ? pinned : ''} ci (${lock})`);
    } else {
      out.commands.push('npm install');
      out.summary.push(`npm${pm?.name === 'npm' ? pinned : ''} install (package.json, no lockfile)`);
    }
    if (present.has('binding.gyp')) {
      add(...NODE_GYP_PACKAGES);
      out.summary.push('binding.gyp: node-gyp builds the addon with python3, make and g++');
    }
  }
  const python = present.has('requirements.txt') || present.has('pyproject.toml');
  if (python) {
    add('python3', 'python3-venv', 'python3-pip');
    const steps = ['python3 -m venv .venv'];
    if (present.has('requirements.txt')) steps.push('.venv/bin/pip install -r requirements.txt');
    else if (pyprojectHasProject) steps.push('.venv/bin/pip install -e .');
    out.commands.push(steps.join(' && '));
    out.summary.push(`Python virtualenv .venv${steps.length > 1 ? ` + ${steps[1]!.replace('.venv/bin/', '')}` : ''} (${present.has('requirements.txt') ? 'requirements.txt' : 'pyproject.toml'})`);
  }
  if (present.has('go.mod')) {
    // Debian's Go (1.19) builds with cgo whenever it can and fails without a C compiler
    // (net, os/user, -race, go-sqlite3): gcc and the C headers make it work as on a desktop.
    add('golang-go', 'gcc', 'libc6-dev');
    out.commands.push('go mod download');
    out.summary.push('go mod download (go.mod)');
  }
  if (present.has('Cargo.toml')) {
    add('cargo');
    out.commands.push('cargo fetch');
    out.summary.push('cargo fetch (Cargo.toml)');
  }
  if (['Makefile', 'makefile', 'GNUmakefile', 'tests/Makefile', 'test/Makefile'].some((f) => present.has(f))) add('make', 'gcc', 'libc6-dev');
  return out;
}

/** package.json makes a Node project when it has scripts or dependencies, a lockfile, or names its package manager. */
export function isNodeProject(present: ReadonlySet<string>, pkg: PackageJsonFacts | undefined): boolean {
  if (['package-lock.json', 'npm-shrinkwrap.json', 'pnpm-lock.yaml', 'yarn.lock'].some((f) => present.has(f))) return true;
  return pkg === undefined || pkg.hasScriptsOrDependencies || pkg.packageManager !== undefined;
}

/** The registry package a package manager's release is published as. */
export function packageManagerPackage(pm: PackageManagerSpec): string {
  return pm.name === 'yarn' && pm.major >= 2 ? '@yarnpkg/cli-dist' : pm.name;
}
