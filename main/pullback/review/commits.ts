// The agent's own commits between the base and the returned head, for the
// review only: none of them lands (Approve makes one commit of the head's tree
// on the base). Listed newest first up to a cap; each commit is read by size
// first and only up to a cap, its author and message taken from the raw object,
// and the message handed to the secret scan like the added lines of a file.
import type { AgentCommit, ReviewHistory } from '../../../common/review.js';
import { firstLine, limitMessage, runGit } from '../../git/host-git.js';
import type { AddedLines } from './added-lines.js';
import { rejected } from './listing.js';
import { objectInfo, readBlobs } from './objects.js';

export const MAX_HISTORY_COMMITS = 200;
export const MAX_MESSAGE_CHARS = 4000;
export const MAX_MESSAGE_SCAN_BYTES = 64 * 1024;
/** Room for a commit's headers (tree, parents, author, committer, a signature) beyond its message. */
const HEADER_BYTES = 16 * 1024;
const MAX_AUTHOR_CHARS = 200;

export interface AgentHistory {
  history: ReviewHistory;
  /** The listed messages as the secret scan reads them: one "file" per commit, named by messagePath(). */
  scan: { paths: string[]; added: AddedLines };
}

/** What a secret finding in a commit's message names as its place. */
export const messagePath = (id: string) => `message of commit ${id}`;

async function revList(qrepo: string, args: string[], timeoutMs: number, maxStdoutBytes?: number): Promise<string> {
  const r = await runGit(['rev-list', ...args], { cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, ...(maxStdoutBytes ? { maxStdoutBytes } : {}) });
  if (r.limitExceeded) throw rejected(`could not list the agent's commits: ${limitMessage(['rev-list'], r)}`);
  if (r.code !== 0) throw rejected(`could not list the agent's commits: ${firstLine(r.stderr) || `exit ${r.code}`}`);
  return r.stdout;
}

/** A raw commit object, possibly cut: its parents, author and message bytes. */
function parseCommit(raw: Buffer): { parents: number; author: string; message: Buffer | undefined } {
  const end = raw.indexOf('\n\n');
  const headers = (end < 0 ? raw : raw.subarray(0, end)).toString('utf8').split('\n');
  let parents = 0;
  let author = '';
  for (const h of headers) {
    if (h.startsWith('parent ')) parents++;
    // "author Name <email> 1700000000 +0000": the time is not shown.
    else if (h.startsWith('author ')) author = h.slice(7).replace(/ -?\d+ [+-]\d{4}$/, '');
  }
  return { parents, author: author.slice(0, MAX_AUTHOR_CHARS), message: end < 0 ? undefined : raw.subarray(end + 2) };
}

export async function readAgentHistory(
  qrepo: string, base: string, head: string,
  opts: { timeoutMs: number; maxCommits?: number; maxMessageChars?: number; maxScanBytes?: number },
): Promise<AgentHistory> {
  const { timeoutMs } = opts;
  const maxCommits = opts.maxCommits ?? MAX_HISTORY_COMMITS;
  const maxMessageChars = opts.maxMessageChars ?? MAX_MESSAGE_CHARS;
  const maxScanBytes = opts.maxScanBytes ?? MAX_MESSAGE_SCAN_BYTES;
  const range = [head, '--not', base];
  const total = Number((await revList(qrepo, ['--count', ...range], timeoutMs)).trim());
  const merges = Number((await revList(qrepo, ['--count', '--merges', ...range], timeoutMs)).trim());
  const ids = (await revList(qrepo, [`--max-count=${maxCommits}`, ...range], timeoutMs, (maxCommits + 1) * 66)).split('\n').filter(Boolean);

  // Sizes first: small commits are read in one batch, a larger one only up to the cap.
  const readCap = maxScanBytes + HEADER_BYTES;
  const sizes = await objectInfo(qrepo, ids, timeoutMs);
  const raws = new Map<string, { raw: Buffer; cut: boolean }>();
  await readBlobs(
    qrepo,
    ids.filter((id) => (sizes.get(id)?.size ?? Infinity) <= readCap).map((id) => ({ oid: id, size: sizes.get(id)!.size })),
    (oid, data) => raws.set(oid, { raw: Buffer.from(data), cut: false }),
    { timeoutMs },
  );
  for (const id of ids.filter((i) => !raws.has(i))) {
    const r = await runGit(['cat-file', 'commit', id], { cwd: qrepo, env: { GIT_DIR: qrepo }, timeoutMs, maxStdoutBytes: readCap });
    if (r.code !== 0 && !r.truncated) throw rejected(`could not read commit ${id}: ${firstLine(r.stderr) || `exit ${r.code}`}`);
    raws.set(id, { raw: r.stdoutBuffer, cut: true });
  }

  const commits: AgentCommit[] = [];
  const byFile: AddedLines['byFile'] = new Map();
  for (const [index, id] of ids.entries()) {
    const { raw, cut } = raws.get(id)!;
    const { parents, author, message } = parseCommit(raw);
    const read = message ?? Buffer.alloc(0);
    // Read in part: the object was over the read cap, or even its headers were.
    const partial = cut || message === undefined;
    const scanned = read.subarray(0, maxScanBytes).toString('utf8');
    const text = read.toString('utf8');
    commits.push({
      id,
      parents,
      author,
      message: text.slice(0, maxMessageChars),
      messageCut: partial || text.length > maxMessageChars,
      scannedInPart: partial || read.length > maxScanBytes,
    });
    const texts = scanned.split('\n');
    if (texts.at(-1) === '') texts.pop();
    byFile.set(index, { lines: texts.map((_t, k) => k + 1), texts });
  }
  return {
    history: { total, merges, commits, maxCommits, maxMessageChars, maxScanBytes },
    scan: { paths: ids.map(messagePath), added: { byFile, firstUnread: ids.length } },
  };
}
