// Agent CLIs ship their Linux binaries inside npm packages. This fetches one
// pinned version with `npm pack` (the ordinary npm client, so registry config
// and proxies apply) into a cache folder, unpacks it once and returns the path
// of the executable. Used by host-side tests and usable by the image build.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export interface NpmBinarySpec {
  /** e.g. '@anthropic-ai/claude-code-linux-x64' or an alias like '@openai/codex@0.171.0-linux-x64'. */
  packageName: string;
  version: string;
  /** Path of the executable inside the unpacked tarball, e.g. 'package/claude'. */
  binPath: string;
}

/** Pinned agent CLI packages (the image manifest pins the same versions). */
export const CLAUDE_CODE_BINARY: NpmBinarySpec = {
  packageName: '@anthropic-ai/claude-code-linux-x64',
  version: '2.1.332',
  binPath: 'package/claude',
};

export const CODEX_BINARY: NpmBinarySpec = {
  // The platform build is published as a version of @openai/codex itself.
  packageName: '@openai/codex',
  version: '0.171.0-linux-x64',
  binPath: 'package/vendor/x86_64-unknown-linux-musl/bin/codex',
};

const SAFE_NAME = /^(@[a-z0-9][a-z0-9._-]*\/)?[a-z0-9][a-z0-9._-]*$/;
const SAFE_VERSION = /^[0-9A-Za-z.+-]+$/;

/** Folder the spec unpacks into under cacheDir: one per package and version. */
export function npmBinaryDir(cacheDir: string, spec: NpmBinarySpec): string {
  const slug = `${spec.packageName.replace(/^@/, '').replace(/\//g, '__')}@${spec.version}`;
  return path.join(cacheDir, 'agent-binaries', slug);
}

/** The executable's path if it has been fetched already, else undefined. No network. */
export function cachedNpmBinary(cacheDir: string, spec: NpmBinarySpec): string | undefined {
  const bin = path.join(npmBinaryDir(cacheDir, spec), spec.binPath);
  return fs.existsSync(bin) ? bin : undefined;
}

/**
 * Returns the executable, running `npm pack` + `tar` on first use. Concurrent
 * callers are safe: each unpacks into a private folder and renames it into place.
 */
export async function fetchNpmBinary(
  cacheDir: string,
  spec: NpmBinarySpec,
  opts: { npm?: string; timeoutMs?: number } = {},
): Promise<string> {
  if (!SAFE_NAME.test(spec.packageName)) throw new Error(`not an npm package name: ${JSON.stringify(spec.packageName)}`);
  if (!SAFE_VERSION.test(spec.version)) throw new Error(`not a version: ${JSON.stringify(spec.version)}`);
  if (path.isAbsolute(spec.binPath) || spec.binPath.split(/[\\/]/).includes('..')) {
    throw new Error(`binPath must stay inside the package: ${JSON.stringify(spec.binPath)}`);
  }
  const cached = cachedNpmBinary(cacheDir, spec);
  if (cached) return cached;

  const finalDir = npmBinaryDir(cacheDir, spec);
  fs.mkdirSync(path.dirname(finalDir), { recursive: true });
  const work = fs.mkdtempSync(`${finalDir}.tmp-`);
  try {
    const timeout = opts.timeoutMs ?? 10 * 60_000;
    const { stdout } = await execFileAsync(
      opts.npm ?? 'npm',
      ['pack', `${spec.packageName}@${spec.version}`, '--pack-destination', work, '--json', '--ignore-scripts'],
      { timeout, maxBuffer: 16 * 1024 * 1024 },
    ).catch((err: Error & { stderr?: string }) => {
      throw new Error(`npm pack ${spec.packageName}@${spec.version} failed: ${(err.stderr ?? err.message).trim().slice(-2000)}`);
    });
    const packed = parsePackOutput(stdout);
    const unpackDir = path.join(work, 'unpacked');
    fs.mkdirSync(unpackDir);
    await execFileAsync('tar', ['-xzf', path.join(work, packed), '-C', unpackDir, '--no-same-owner'], { timeout });
    const bin = path.join(unpackDir, spec.binPath);
    if (!fs.existsSync(bin)) throw new Error(`${spec.packageName}@${spec.version} has no ${spec.binPath}`);
    fs.chmodSync(bin, 0o755);
    try {
      fs.renameSync(unpackDir, finalDir);
    } catch (err) {
      // Another caller won the race: use theirs.
      if (!cachedNpmBinary(cacheDir, spec)) throw err;
    }
    return path.join(finalDir, spec.binPath);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

function parsePackOutput(stdout: string): string {
  let filename: unknown;
  try {
    const parsed = JSON.parse(stdout) as Array<{ filename?: unknown }>;
    filename = parsed[0]?.filename;
  } catch {
    // Older npm prints the tarball name as the last plain line instead of JSON; checked below.
    filename = stdout.trim().split('\n').pop();
  }
  if (typeof filename !== 'string' || !/^[A-Za-z0-9@._-]+\.tgz$/.test(filename.replace(/^@/, '').replace(/\//g, '-'))) {
    throw new Error(`npm pack printed no tarball name: ${stdout.slice(0, 200)}`);
  }
  // npm names scoped tarballs scope-name-version.tgz
  return filename.replace(/^@/, '').replace(/\//g, '-');
}
