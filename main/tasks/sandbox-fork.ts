// A sandbox forked from a running one (issue 27: a subagent's sandbox from its
// session's): the parent's disk is frozen with its memory of the same instant,
// exactly as a cached environment's layer is made (setup-phase.ts), and the
// child boots on that frozen disk with that memory, the way a task boots on a
// warm layer: restored, then re-keyed (new SSH keys, machine id, entropy). The
// parent pauses only while its memory is written and goes on in a new overlay.
// The child has the parent's repository as it was, uncommitted files included,
// without a seed or a setup of its own.
import { rm } from 'node:fs/promises';
import type { LiveSandbox } from '../sandbox/live-sandboxes.js';
import type { SandboxSshPort, WarmMemoryPort } from '../sandbox/sandbox-ports.js';
import { asAgent, GUEST_REPO_DIR, shellQuote } from '../guest/guest-shell.js';

export interface ForkPoint {
  /** The parent's disk as it was at the fork (read-only; part of the parent's chain). */
  backingDisk: string;
  /** The parent's memory of that instant, when it could be saved (else the child boots cold on the disk). */
  warm?: WarmMemoryPort;
  /** The machine size the memory belongs to: the child must have the same. */
  memoryMb?: number;
  /** Why the memory was not saved, when it was not. */
  memoryError?: string;
  /** The memory file is read once, at the child's start: it goes after that (it is as large as the guest's memory in use). */
  dropMemory(): Promise<void>;
}

/** Freezes a running sandbox's disk and memory for a child to boot on; throws with the reason when it cannot. */
export async function forkPoint(parent: LiveSandbox): Promise<ForkPoint> {
  const vm = parent.vm;
  if (!vm?.freezeDisk || !parent.ssh) throw new Error('the session’s sandbox cannot be forked (no running local sandbox)');
  // What the guest wrote must be on the frozen disk; empty caches make the saved memory small.
  const sync = await parent.ssh.run('sync && { echo 3 > /proc/sys/vm/drop_caches || true; }', { timeoutMs: 60_000 });
  if (sync.code !== 0) throw new Error(`sync in the session’s sandbox failed: ${sync.stderr.trim().slice(0, 200)}`);
  const frozen = await vm.freezeDisk({ memory: true });
  const warm = frozen.memory;
  return {
    backingDisk: frozen.disk,
    ...(warm ? { warm } : {}),
    ...(parent.memoryMb ? { memoryMb: parent.memoryMb } : {}),
    ...(frozen.memoryError ? { memoryError: frozen.memoryError } : {}),
    dropMemory: async () => {
      if (warm) await rm(warm.dir, { recursive: true, force: true });
    },
  };
}

/**
 * The forked repository made the child's: on the child's own branch (from the
 * parent's HEAD, its uncommitted files kept), with `upstream` the child's own git
 * URL (the parent's carries the parent's placeholder, which the child's proxy
 * refuses), or none. Returns the commit it is at: the child's work is what comes after it.
 */
export async function adoptForkedRepo(ssh: SandboxSshPort, branch: string, upstreamUrl?: string): Promise<string> {
  const script = [
    'set -e',
    `cd ${GUEST_REPO_DIR}`,
    `git -c core.hooksPath=/dev/null switch -q -C ${shellQuote(branch)}`,
    'git -c core.hooksPath=/dev/null remote remove upstream 2>/dev/null || true',
    ...(upstreamUrl ? [`git -c core.hooksPath=/dev/null remote add upstream ${shellQuote(upstreamUrl)}`] : []),
    'git rev-parse HEAD',
  ].join('\n');
  const r = await ssh.run(asAgent(script), { timeoutMs: 30_000 });
  const head = r.stdout.trim();
  if (r.code !== 0 || !/^[0-9a-f]{40}$/.test(head)) throw new Error(`the forked repository could not be taken over: ${(r.stderr || r.stdout).trim().slice(0, 200)}`);
  return head;
}
