// A hooks session's working tree, carried one way into its sandbox before each
// routed command (issue 27): the user sees the agent's edits on this computer
// (Read/Edit/Write act there), and the command in the sandbox sees them too.
// Incremental: a file is sent when its state on disk (size, time, inode, mode,
// link target) differs from what was last sent; a file that is gone is removed.
// The candidates are what `git status` lists as changed or untracked (ignored
// files such as node_modules never travel) and what was sent before (a file
// the user reverted goes again). Bounded: at most MAX_FILES files and
// MAX_BYTES bytes per sync, else nothing is sent and the error names the
// largest files. Nothing ever comes back this way: what the sandbox produces
// returns only through the review.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FactoryError } from '../../common/contract.js';
import { uncommittedChanges } from '../git/work-tree-changes.js';
import type { ClientChannel } from 'ssh2';
import type { GuestSsh } from '../guest/guest-ssh.js';
import { asAgent, GUEST_REPO_DIR, shellQuote } from '../guest/guest-shell.js';
import { drainedOrClosed } from '../streams/drained.js';

export const SYNC_MAX_BYTES = 64 * 1024 * 1024;
export const SYNC_MAX_FILES = 5000;
const SYNC_TIMEOUT_MS = 120_000;

export interface SyncPlan {
  send: Array<{ path: string; size: number; sig: string }>;
  remove: string[];
  bytes: number;
}

/** A sync taken to travel with a command (WorkingTreeSync.take). */
export interface Carry extends SyncResult {
  /** Paths for the command's guest script to remove first. */
  remove: string[];
  /** Writes the files (a tar) on the command's stdin and ends it; none when nothing is sent. */
  feed?: (channel: ClientChannel) => Promise<void>;
  /** The carry did not arrive: what it held is sent again next time. */
  rollback(): void;
}

/** How the guest unpacks what is carried in (as the agent user, into the repository). */
export const GUEST_UNTAR = 'tar -x -f - --no-same-owner --no-overwrite-dir';

/** Removals longer than this go ahead in a call of their own rather than as the command's arguments. */
const INLINE_REMOVALS_BYTES = 16 * 1024;

export interface SyncResult {
  sent: number;
  removed: number;
  bytes: number;
}

export class WorkingTreeSync {
  /** path → the state it had on disk when it was last sent ('gone' once removed). */
  private readonly sent = new Map<string, string>();
  private running: Promise<unknown> | undefined;

  private readonly limits: { maxBytes: number; maxFiles: number };
  private readonly guest: { dir: string; run: (script: string) => string };

  /** `guest`: where the repository is in the sandbox and how a script runs there (the agent user); tests point it elsewhere. */
  constructor(
    private readonly repoPath: string,
    opts: { maxBytes?: number; maxFiles?: number; guest?: { dir: string; run: (script: string) => string } } = {},
  ) {
    this.limits = { maxBytes: opts.maxBytes ?? SYNC_MAX_BYTES, maxFiles: opts.maxFiles ?? SYNC_MAX_FILES };
    this.guest = opts.guest ?? { dir: GUEST_REPO_DIR, run: asAgent };
  }

  /**
   * The working tree's changes carried in on their own (no command with them):
   * removals, then the files. A sync that failed is sent again next time.
   */
  async sync(ssh: Pick<GuestSsh, 'exec'>): Promise<SyncResult> {
    const carry = await this.take(ssh);
    const feed = carry.feed;
    try {
      if (carry.remove.length) await this.removeInGuest(ssh, carry.remove);
      if (feed) await guestCommand(ssh, this.guest.run(`cd ${shellQuote(this.guest.dir)} && ${GUEST_UNTAR}`), feed);
    } catch (err) {
      carry.rollback();
      throw err;
    }
    return { sent: carry.sent, removed: carry.removed, bytes: carry.bytes };
  }

  /**
   * The sync folded into the command's own guest process (under emulation each
   * process start in the guest costs much): the plan is taken now and counted
   * as sent; the caller's guest script removes `remove` and extracts what
   * `feed` writes on its stdin, then runs the command. A long list of removals
   * goes ahead in a call of its own. `rollback` when the carry did not arrive.
   */
  take(ssh: Pick<GuestSsh, 'exec'>): Promise<Carry> {
    // One plan at a time per sandbox: a second command's plan sees what the first one's took.
    // The previous plan's failure was its caller's to handle; this one starts afresh.
    const run = (this.running ?? Promise.resolve()).catch(() => undefined).then(async (): Promise<Carry> => {
      const plan = await this.plan();
      let inline = plan.remove;
      if (plan.remove.reduce((n, p) => n + Buffer.byteLength(p) + 4, 0) > INLINE_REMOVALS_BYTES) {
        await this.removeInGuest(ssh, plan.remove);
        inline = [];
      }
      const before = new Map([...plan.send.map((f) => f.path), ...plan.remove].map((p) => [p, this.sent.get(p)]));
      this.mark(plan);
      const tar = plan.send.length ? this.tarOf(plan) : undefined;
      return {
        sent: plan.send.length,
        removed: plan.remove.length,
        bytes: plan.bytes,
        remove: inline,
        ...(tar ? { feed: async (channel: ClientChannel) => (await pump(channel, tar.stream, tar.cap), await tar.done()) } : {}),
        rollback: () => {
          for (const [p, sig] of before) {
            if (sig === undefined) this.sent.delete(p);
            else this.sent.set(p, sig);
          }
        },
      };
    });
    this.running = run;
    return run;
  }

  private mark(plan: SyncPlan): void {
    for (const f of plan.send) this.sent.set(f.path, f.sig);
    for (const p of plan.remove) this.sent.set(p, 'gone');
  }

  private removeInGuest(ssh: Pick<GuestSsh, 'exec'>, paths: string[]): Promise<void> {
    const list = Buffer.from(paths.map((p) => `${p}\0`).join(''));
    return guestCommand(ssh, this.guest.run(`cd ${shellQuote(this.guest.dir)} && xargs -0 -r rm -f --`), (channel) => (channel.end(list), Promise.resolve()));
  }

  /** What this sync would send and remove; throws SyncTooLarge over the limits. */
  async plan(): Promise<SyncPlan> {
    const changed = await uncommittedChanges(this.repoPath, SYNC_TIMEOUT_MS);
    const candidates = new Set([...changed.map((c) => c.path), ...this.sent.keys()]);
    const plan: SyncPlan = { send: [], remove: [], bytes: 0 };
    for (const rel of candidates) {
      const sig = signature(path.join(this.repoPath, rel));
      if (sig === undefined) continue; // a folder or a special file: not carried
      if (this.sent.get(rel) === sig) continue;
      if (sig === 'gone') {
        plan.remove.push(rel);
        continue;
      }
      const size = sig.startsWith('link:') ? 0 : Number(sig.split(':')[1]);
      plan.send.push({ path: rel, size, sig });
      plan.bytes += size;
    }
    if (plan.send.length > this.limits.maxFiles || plan.bytes > this.limits.maxBytes) {
      const largest = [...plan.send].sort((a, b) => b.size - a.size).slice(0, 3).map((f) => `${JSON.stringify(f.path)} (${mib(f.size)})`);
      throw new FactoryError(
        'SyncTooLarge',
        `the working tree's changes are too large to carry into the sandbox before the command: ${plan.send.length} files, ${mib(plan.bytes)} ` +
          `(at most ${this.limits.maxFiles} files and ${mib(this.limits.maxBytes)}); the largest: ${largest.join(', ')}. ` +
          'Add generated files to .gitignore, or commit them; the command did not run',
      );
    }
    return plan;
  }

  /**
   * The files as a tar stream from this computer's tar (links stored as links,
   * never followed). tar starts when `stream` is called, once the guest's
   * channel is open: output nobody reads yet is dropped when tar exits.
   */
  private tarOf(plan: SyncPlan): { stream: () => NodeJS.ReadableStream; cap: number; done: () => Promise<void> } {
    let tarErr = '';
    let exited: Promise<number | null> = Promise.resolve(0);
    return {
      stream: () => {
        const tar = spawn('tar', ['-c', '-f', '-', '--null', '--no-recursion', '-T', '-'], { cwd: this.repoPath, stdio: ['pipe', 'pipe', 'pipe'] });
        tar.stdin.end(plan.send.map((f) => `${f.path}\0`).join(''));
        tar.stderr.on('data', (d: Buffer) => (tarErr = (tarErr + d.toString('utf8')).slice(-2000)));
        exited = new Promise<number | null>((resolve) => tar.on('close', (code) => resolve(code)));
        return tar.stdout;
      },
      // A file that grew after it was measured: the stream stops at the limit plus the tar framing.
      cap: plan.bytes + plan.send.length * 1536 + 10240 + 1024 * 1024,
      done: async () => {
        const code = await exited;
        if (code !== 0) throw new FactoryError('SyncFailed', `reading the working tree's changed files failed (tar exit ${code}): ${tarErr.trim().slice(0, 300)}`);
      },
    };
  }
}

/** The state of a path on disk: 'gone', 'link:<target>', 'file:<size>:<mtime>:<ino>:<mode>', or undefined for what is not carried. */
function signature(full: string): string | undefined {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(full);
  } catch {
    // Not there: it was removed.
    return 'gone';
  }
  if (st.isSymbolicLink()) return `link:${fs.readlinkSync(full)}`;
  if (!st.isFile()) return undefined;
  return `file:${st.size}:${st.mtimeMs}:${st.ino}:${st.mode}`;
}

/** Runs `command` in the guest, `feed` writing its stdin; throws with its stderr when it fails. */
async function guestCommand(ssh: Pick<GuestSsh, 'exec'>, command: string, feed: (channel: ClientChannel) => Promise<void>): Promise<void> {
  const channel = await ssh.exec(command);
  let err = '';
  channel.stderr.on('data', (d: Buffer) => (err = (err + d.toString('utf8')).slice(-2000)));
  channel.on('data', () => undefined);
  let guestEnded = false;
  const done = new Promise<number | null>((resolve) => {
    let code: number | null = null;
    channel.on('exit', (c: number | null) => (code = c));
    channel.on('close', () => ((guestEnded = true), resolve(code)));
  });
  const timer = setTimeout(() => channel.close(), SYNC_TIMEOUT_MS);
  try {
    let fed: { err: unknown } | undefined;
    await feed(channel).catch((e: unknown) => (fed = { err: e }));
    // A feed that failed because the guest ended first (its stream stopped, this computer's tar
    // killed) hides the reason: the guest's own error is it. Otherwise the feed's error is.
    if (fed && !guestEnded) {
      channel.close();
      throw fed.err;
    }
    const code = await done;
    if (code !== 0) throw new FactoryError('SyncFailed', `carrying the working tree's changes into the sandbox failed (exit ${code}): ${err.trim().slice(0, 300)}`);
    if (fed) throw fed.err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Writes `source()` into the channel and ends it, at most `cap` bytes. The
 * guest may end first (it failed): reading and writing stop then, instead of
 * waiting for a drain that never comes.
 */
async function pump(channel: ClientChannel, source: () => NodeJS.ReadableStream, cap: number): Promise<void> {
  const src = source() as NodeJS.ReadableStream & { destroy(): void };
  let closed = false;
  channel.once('close', () => {
    closed = true;
    src.destroy();
  });
  let n = 0;
  try {
    for await (const chunk of src as AsyncIterable<Buffer>) {
      n += chunk.length;
      if (n > cap) {
        channel.close();
        throw new FactoryError('SyncTooLarge', 'the working tree changed while it was carried into the sandbox (a file grew past what was measured); the command did not run: try again');
      }
      if (closed) break;
      if (!channel.write(chunk)) await drainedOrClosed(channel);
    }
  } catch (err) {
    if (!closed || err instanceof FactoryError) throw err;
  }
  if (!closed) channel.end();
}

function mib(n: number): string {
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}
