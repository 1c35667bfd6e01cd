// What a repository needs when it says nothing itself: found from the files it
// holds at the base commit. Each finding is a Debian package set and the
// project's own install command (run as the agent user), with the files whose
// content keys the cached environment.
import { shellQuote } from '../../common/shell-quote.js';
import { FactoryError } from '../../common/contract.js';

/** Every file detection and the node spec look at (one lookup at the base commit). */
export const DETECTION_FILES = [
  'package.json', 'package-lock.json', 'npm-shrinkwrap.json', 'pnpm-lock.yaml', 'yarn.lock',
  'requirements.txt', 'pyproject.toml', 'go.mod', 'go.sum', 'Cargo.toml', 'Cargo.lock',
  'Makefile', 'makefile', 'GNUmakefile',
] as const;

/** Files that key the environment cache by default, when present. */
export const DEFAULT_KEY_FILES = [
  'package.json', 'package-lock.json', 'npm-shrinkwrap.json', 'pnpm-lock.yaml', 'yarn.lock',
  'requirements.txt', 'pyproject.toml', 'go.mod', 'go.sum', 'Cargo.toml', 'Cargo.lock',
] as const;

export interface PackageJsonFacts {
  engineNode?: string;
  /** "pnpm@9.1.0" → { name: 'pnpm', major: 9 }. */
  packageManager?: { name: string; major: number };
}

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
  const facts: PackageJsonFacts = {};
  const engines = obj.engines;
  if (typeof engines === 'object' && engines !== null && typeof (engines as Record<string, unknown>).node === 'string') {
    facts.engineNode = (engines as Record<string, string>).node;
  }
  if (obj.packageManager !== undefined) {
    const m = typeof obj.packageManager === 'string' ? /^(npm|pnpm|yarn)@(\d{1,3})\.[^\s]*$/.exec(obj.packageManager) : null;
    if (!m) throw new FactoryError('InvalidInput', 'packageManager: expected "npm@<version>", "pnpm@<version>" or "yarn@<version>" in package.json');
    facts.packageManager = { name: m[1]!, major: Number(m[2]) };
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

/** `present` holds the DETECTION_FILES found; `pyprojectHasProject` whether pyproject.toml has a [project] table. */
export function detect(present: ReadonlySet<string>, pkg: PackageJsonFacts | undefined, pyprojectHasProject: boolean): Detected {
  const out: Detected = { debianPackages: [], commands: [], summary: [], needsNode: false };
  const add = (...names: string[]): void => {
    for (const n of names) if (!out.debianPackages.includes(n)) out.debianPackages.push(n);
  };
  if (present.has('package.json')) {
    out.needsNode = true;
    const pm = pkg?.packageManager;
    const lock = ['package-lock.json', 'npm-shrinkwrap.json'].find((f) => present.has(f));
    if (present.has('pnpm-lock.yaml') || pm?.name === 'pnpm') {
      const major = pm?.name === 'pnpm' ? pm.major : 9;
      const frozen = present.has('pnpm-lock.yaml') ? ' --frozen-lockfile' : '';
      out.commands.push(`npm exec --yes --package=${shellQuote(`pnpm@${major}`)} -- pnpm install${frozen}`);
      out.summary.push(`pnpm ${major} install${frozen} (${present.has('pnpm-lock.yaml') ? 'pnpm-lock.yaml' : 'packageManager'})`);
    } else if (present.has('yarn.lock') || pm?.name === 'yarn') {
      const major = pm?.name === 'yarn' ? pm.major : 1;
      const locked = present.has('yarn.lock');
      // Yarn 2+ is published as @yarnpkg/cli-dist; its lockfile flag is --immutable.
      const [pkgName, flag] = major >= 2 ? [`@yarnpkg/cli-dist@${major}`, ' --immutable'] : [`yarn@${major}`, ' --frozen-lockfile'];
      const bin = major >= 2 ? 'yarnpkg' : 'yarn';
      out.commands.push(`npm exec --yes --package=${shellQuote(pkgName)} -- ${bin} install${locked ? flag : ''}`);
      out.summary.push(`yarn ${major} install${locked ? flag : ''} (${locked ? 'yarn.lock' : 'packageManager'})`);
    } else if (lock) {
      out.commands.push('npm ci');
      out.summary.push(`npm ci (${lock})`);
    } else {
      out.commands.push('npm install');
      out.summary.push('npm install (package.json, no lockfile)');
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
    add('golang-go');
    out.commands.push('go mod download');
    out.summary.push('go mod download (go.mod)');
  }
  if (present.has('Cargo.toml')) {
    add('cargo');
    out.commands.push('cargo fetch');
    out.summary.push('cargo fetch (Cargo.toml)');
  }
  if (['Makefile', 'makefile', 'GNUmakefile'].some((f) => present.has(f))) add('make', 'gcc', 'libc6-dev');
  return out;
}
