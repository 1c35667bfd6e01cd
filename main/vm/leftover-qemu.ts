// Crash cleanup: finding the QEMU a sandbox folder's last app run left behind,
// on Linux and macOS alike. Every QEMU the driver starts begins its command
// line with `-name factory-<id> -pidfile <folder>/qemu.pid` (sandbox-files.ts),
// and `ps -o command=` shows command lines on both systems (/proc exists only
// on Linux). A pid is killed only if the process behind it now is such a QEMU
// of this very folder: a pid file or task record can outlive its process, and
// the pid may belong to anything by now.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { qemuIdentityArgs, sandboxFiles } from './sandbox-files.js';

/** How a process's command line is read: `ps` (POSIX), or Linux's /proc where ps is missing. */
export type CommandLineSource = 'ps' | 'proc';

/**
 * The command line of pid, arguments joined by spaces, or undefined when no
 * such process runs. Rejects only when the process table cannot be read at all.
 */
export async function commandLineOf(pid: number, source: CommandLineSource = 'ps'): Promise<string | undefined> {
  if (!Number.isSafeInteger(pid) || pid <= 1) return undefined;
  if (source === 'proc') {
    // Unreadable means no such process (or no /proc): nothing to identify.
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
    // A zombie or kernel thread has an empty command line: nothing that could be killed usefully.
    return raw ? raw.replace(/\0$/, '').replace(/\0/g, ' ') : undefined;
  }
  return new Promise((resolve, reject) => {
    // -ww: no truncation to the terminal width (procps and BSD ps alike).
    execFile('ps', ['-ww', '-o', 'command=', '-p', String(pid)], { timeout: 10_000, maxBuffer: 1024 * 1024 }, (err, stdout) => {
      const line = stdout.replace(/\n+$/, '');
      if (!err) return resolve(line || undefined);
      // execFile's error code is ps's exit status, or a string for a spawn failure.
      const e = err as Error & { code?: number | string };
      // ps exits 1 with no output when the pid does not exist.
      if (e.code === 1 && !line) return resolve(undefined);
      if (e.code === 'ENOENT') {
        commandLineOf(pid, 'proc').then(resolve, reject);
        return;
      }
      reject(new Error(`could not read the process table with ps: ${e.message}`));
    });
  });
}

/** True if pid is now a QEMU process started by the driver for sandboxDir. */
export async function isOurQemu(pid: number, sandboxDir: string, source: CommandLineSource = 'ps'): Promise<boolean> {
  if (pid === process.pid) return false;
  const command = await commandLineOf(pid, source);
  return command !== undefined && commandIsOurQemu(command, sandboxDir);
}

/**
 * Whether a command line (as ps shows it) is the driver's QEMU of sandboxDir:
 * the program is a qemu-system-* binary and its first arguments are exactly
 * that folder's name and pidfile. Pure, for tests of hostile look-alikes.
 */
export function commandIsOurQemu(command: string, sandboxDir: string): boolean {
  const identity = ' ' + qemuIdentityArgs(sandboxDir).join(' ');
  const at = command.indexOf(identity);
  if (at <= 0) return false;
  // The pidfile path must end there: /sb/qemu.pid is not /sb/qemu.pid.old.
  const after = command.charAt(at + identity.length);
  if (after !== '' && after !== ' ') return false;
  // The program is everything before it (its path may contain spaces).
  const program = command.slice(0, at);
  return /^qemu-system-[a-z0-9_]+$/.test(path.basename(program));
}

/** Pids from the folder's pidfile and the caller's record (e.g. the pid saved with the task), deduplicated. */
async function candidatePids(sandboxDir: string, alsoPids: Iterable<number>): Promise<number[]> {
  const pids = new Set<number>();
  for (const pid of alsoPids) if (Number.isSafeInteger(pid) && pid > 1) pids.add(pid);
  // No pid file: QEMU never got that far, or teardown already removed it.
  const text = await readFile(sandboxFiles(path.resolve(sandboxDir)).pidFile, 'utf8').catch(() => '');
  // QEMU writes "<pid>\n"; anything else is not a pid of ours.
  if (/^\d{1,10}\n?$/.test(text) && Number(text) > 1) pids.add(Number(text));
  return [...pids];
}

/** The QEMU processes of sandboxDir still running: from its pidfile and alsoPids, each checked with isOurQemu. */
export async function findLeftoverQemu(sandboxDir: string, alsoPids: Iterable<number> = [], source: CommandLineSource = 'ps'): Promise<number[]> {
  const found: number[] = [];
  for (const pid of await candidatePids(sandboxDir, alsoPids)) {
    if (await isOurQemu(pid, sandboxDir, source)) found.push(pid);
  }
  return found;
}

/**
 * Kills (SIGKILL) the QEMU processes of sandboxDir left by an earlier run and
 * waits until they are gone (up to timeoutMs); resolves to the pids killed.
 * Never signals a process that is not the folder's QEMU.
 */
export async function killLeftoverQemu(
  sandboxDir: string,
  alsoPids: Iterable<number> = [],
  opts: { timeoutMs?: number; source?: CommandLineSource } = {},
): Promise<number[]> {
  const source = opts.source ?? 'ps';
  const killed: number[] = [];
  for (const pid of await findLeftoverQemu(sandboxDir, alsoPids, source)) {
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch (err) {
      // Gone between the check and the kill: nothing left to do.
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  const deadline = Date.now() + (opts.timeoutMs ?? 5000);
  for (const pid of killed) {
    // A killed process that is still someone's unreaped child shows as <defunct>, no longer as our QEMU.
    while ((await isOurQemu(pid, sandboxDir, source)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }
  return killed;
}
