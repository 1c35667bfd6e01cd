// Reading the returned objects from the quarantine repository: sizes first
// (`git cat-file --batch-check`), content only after the size is known and
// within a budget (`git cat-file --batch` in bounded batches).
import { firstLine, runGit } from '../../git/host-git.js';
import { rejected } from './listing.js';

export interface ObjectInfo {
  type: string;
  size: number;
}

const ZERO_OID = /^0+$/;

/** Type and size of each object; objects git does not have are absent from the map. */
export async function objectInfo(qrepo: string, oids: Iterable<string>, timeoutMs: number): Promise<Map<string, ObjectInfo>> {
  const unique = [...new Set(oids)].filter((o) => !ZERO_OID.test(o));
  const info = new Map<string, ObjectInfo>();
  if (unique.length === 0) return info;
  const r = await runGit(['cat-file', '--batch-check'], {
    cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, input: unique.join('\n') + '\n', maxStdoutBytes: unique.length * 128 + 4096,
  });
  if (r.code !== 0) throw rejected(`git cat-file --batch-check failed: ${firstLine(r.stderr) || `exit ${r.code}`}`);
  for (const line of r.stdout.split('\n')) {
    const m = /^([0-9a-f]{40,64}) (blob|tree|commit|tag) (\d+)$/.exec(line);
    if (m) info.set(m[1]!, { type: m[2]!, size: Number(m[3]) });
  }
  return info;
}

/**
 * Calls `onBlob` with the content of each object, read in batches of at most
 * `batchBytes` (by the sizes given, which the caller took from objectInfo and
 * checked against its own caps).
 */
export async function readBlobs(
  qrepo: string,
  items: ReadonlyArray<{ oid: string; size: number }>,
  onBlob: (oid: string, data: Buffer) => void,
  opts: { timeoutMs: number; batchBytes?: number },
): Promise<void> {
  const batchBytes = opts.batchBytes ?? 16 * 1024 * 1024;
  let batch: Array<{ oid: string; size: number }> = [];
  let bytes = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const expected = batch.reduce((n, b) => n + b.size + b.oid.length + 32, 0);
    const r = await runGit(['cat-file', '--batch'], {
      cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs: opts.timeoutMs, input: batch.map((b) => b.oid).join('\n') + '\n', maxStdoutBytes: expected,
    });
    if (r.code !== 0 || r.truncated) throw rejected(`git cat-file --batch failed: ${r.truncated ? 'more output than the objects\' sizes' : firstLine(r.stderr) || `exit ${r.code}`}`);
    parseBatch(r.stdoutBuffer, onBlob);
    batch = [];
    bytes = 0;
  };
  for (const item of items) {
    if (bytes > 0 && bytes + item.size > batchBytes) await flush();
    batch.push(item);
    bytes += item.size;
  }
  await flush();
}

/** `git cat-file --batch` output: "<oid> <type> <size>\n<content>\n" per object. */
export function parseBatch(out: Buffer, onBlob: (oid: string, data: Buffer) => void): void {
  let at = 0;
  while (at < out.length) {
    const nl = out.indexOf(0x0a, at);
    if (nl < 0) throw rejected('git cat-file --batch ended in the middle of a header');
    const header = out.subarray(at, nl).toString('latin1');
    const m = /^([0-9a-f]{40,64}) (\w+) (\d+)$/.exec(header);
    if (!m) throw rejected(`git cat-file --batch could not read an object: ${header.slice(0, 120)}`);
    const size = Number(m[3]);
    const start = nl + 1;
    if (start + size > out.length) throw rejected('git cat-file --batch ended in the middle of an object');
    onBlob(m[1]!, out.subarray(start, start + size));
    at = start + size + 1;
  }
}

/** The first `n` bytes of a blob (git stops writing when we stop reading). */
export async function readBlobHead(qrepo: string, oid: string, n: number, timeoutMs: number): Promise<Buffer> {
  if (n <= 0) return Buffer.alloc(0);
  const r = await runGit(['cat-file', 'blob', oid], { cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, maxStdoutBytes: n });
  if (r.code !== 0 && !r.truncated) throw rejected(`git cat-file blob failed: ${firstLine(r.stderr) || `exit ${r.code}`}`);
  return r.stdoutBuffer.subarray(0, n);
}
