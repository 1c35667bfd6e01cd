// Crash cleanup with real processes: a real QEMU left running for a sandbox
// folder (daemonized, as if the app that started it had died) is found and
// killed; look-alikes are never touched: a process whose pid sits in the
// folder's pid file after the QEMU is gone (pid reuse), a process dressed up
// with "qemu" and the folder's path in its command line, and the real QEMU of
// another sandbox folder whose path starts the same way.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { processAlive } from '../../../main/vm/file-lock.js';
import {
  commandIsOurQemu,
  commandLineOf,
  findLeftoverQemu,
  isOurQemu,
  killLeftoverQemu,
  type CommandLineSource,
} from '../../../main/vm/leftover-qemu.js';
import { qemuIdentityArgs, sandboxFiles } from '../../../main/vm/sandbox-files.js';

const run = promisify(execFile);
const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function sandboxDir(name = 'sb'): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'leftover-'));
  cleanup.push(() => rm(root, { recursive: true, force: true }));
  const dir = path.join(root, name);
  await mkdir(dir);
  return dir;
}

function killQuietly(pid: number) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * A real QEMU started with the driver's identity arguments for dir, which then
 * detaches (-daemonize): nobody waits for it, as after an app crash. No guest:
 * an empty machine, paused, is all the identification needs.
 */
async function leftoverQemu(dir: string): Promise<number> {
  await run('qemu-system-x86_64', [...qemuIdentityArgs(dir), '-nodefaults', '-machine', 'none', '-display', 'none', '-S', '-daemonize']);
  const pid = Number((await readFile(sandboxFiles(dir).pidFile, 'utf8')).trim());
  cleanup.push(() => killQuietly(pid));
  expect(processAlive(pid)).toBe(true);
  return pid;
}

function longRunning(command: string, args: string[], opts: { argv0?: string } = {}): ChildProcess {
  const child = spawn(command, args, { stdio: 'ignore', ...opts });
  cleanup.push(() => {
    child.kill('SIGKILL');
  });
  return child;
}

async function stillRunning(child: ChildProcess): Promise<boolean> {
  // Give a wrongly sent SIGKILL time to land before looking.
  await new Promise((r) => setTimeout(r, 200));
  return child.exitCode === null && child.signalCode === null;
}

describe.each<CommandLineSource>(['ps', 'proc'])('crash cleanup of leftover QEMU (command lines via %s)', (source) => {
  it('finds the QEMU a crashed app left running for the sandbox and kills it', async () => {
    const dir = await sandboxDir();
    const pid = await leftoverQemu(dir);
    expect(await isOurQemu(pid, dir, source)).toBe(true);
    expect(await findLeftoverQemu(dir, [], source)).toEqual([pid]);
    expect(await killLeftoverQemu(dir, [], { source })).toEqual([pid]);
    expect(await isOurQemu(pid, dir, source)).toBe(false);
    expect(await findLeftoverQemu(dir, [], source)).toEqual([]);
  });

  it('also checks the pid the task record kept when the pid file is gone', async () => {
    const dir = await sandboxDir();
    const pid = await leftoverQemu(dir);
    await rm(sandboxFiles(dir).pidFile);
    expect(await findLeftoverQemu(dir, [], source)).toEqual([]);
    expect(await killLeftoverQemu(dir, [pid, pid], { source })).toEqual([pid]);
    expect(await isOurQemu(pid, dir, source)).toBe(false);
  });

  it('does not kill a process that took over the pid in the pid file', async () => {
    const dir = await sandboxDir();
    const other = longRunning('sleep', ['300']);
    await writeFile(sandboxFiles(dir).pidFile, `${other.pid}\n`);
    expect(await killLeftoverQemu(dir, [other.pid!], { source })).toEqual([]);
    expect(await stillRunning(other)).toBe(true);
  });

  it('does not kill a look-alike whose command line names qemu and the sandbox folder', async () => {
    const dir = await sandboxDir();
    // argv[0] "qemu-system-x86_64", and the folder's identity arguments later on the line.
    const impostor = longRunning(process.execPath, ['-e', 'setTimeout(() => {}, 300000)', '--', ...qemuIdentityArgs(dir)], { argv0: 'qemu-system-x86_64' });
    // Its command line is final once the exec happened ('spawn'); no fixed pause.
    await new Promise((r) => impostor.once('spawn', r));
    const command = await commandLineOf(impostor.pid!, source);
    expect(command).toContain(dir);
    expect(command).toContain('qemu');
    await writeFile(sandboxFiles(dir).pidFile, `${impostor.pid}\n`);
    expect(await killLeftoverQemu(dir, [], { source })).toEqual([]);
    expect(await stillRunning(impostor)).toBe(true);
  });

  it("does not kill another sandbox's QEMU whose folder name starts with this one's", async () => {
    const dir = await sandboxDir('task-1');
    const otherDir = path.join(path.dirname(dir), 'task-1-retry');
    await mkdir(otherDir);
    const otherPid = await leftoverQemu(otherDir);
    await writeFile(sandboxFiles(dir).pidFile, `${otherPid}\n`);
    expect(await killLeftoverQemu(dir, [otherPid], { source })).toEqual([]);
    expect(processAlive(otherPid)).toBe(true);
    expect(await isOurQemu(otherPid, otherDir, source)).toBe(true);
  });
});

describe('identifying a leftover QEMU', () => {
  it('ignores pid files that hold no pid of a process, and never picks this process', async () => {
    const dir = await sandboxDir();
    for (const junk of ['', 'abc\n', '1\n', '0\n', '-5\n', `${process.pid} 99\n`, '99999999999999\n', `${process.pid}\n`]) {
      await writeFile(sandboxFiles(dir).pidFile, junk);
      expect(await findLeftoverQemu(dir, [process.pid, 0, -1, Number.NaN, 1.5])).toEqual([]);
    }
    expect(await isOurQemu(process.pid, dir)).toBe(false);
  });

  it('reads no command line for a pid that is not running', async () => {
    const child = spawn('true');
    await new Promise((r) => child.once('exit', r));
    expect(await commandLineOf(child.pid!)).toBeUndefined();
    expect(await commandLineOf(child.pid!, 'proc')).toBeUndefined();
  });

  it('accepts only a qemu-system program with the folder identity right after it', () => {
    const dir = '/data/sandboxes/t1';
    const id = qemuIdentityArgs(dir).join(' ');
    expect(commandIsOurQemu(`qemu-system-x86_64 ${id} -nodefaults -m 2048`, dir)).toBe(true);
    expect(commandIsOurQemu(`/opt/homebrew/Cellar/qemu 9/bin/qemu-system-x86_64 ${id}`, dir)).toBe(true);
    expect(commandIsOurQemu(`qemu-system-aarch64 ${id} -nodefaults`, dir)).toBe(true);
    for (const other of [
      `${id} -nodefaults`, // no program
      `bash ${id}`,
      `/usr/bin/notqemu-system-x86_64 ${id}`,
      `/tmp/qemu-system-x86_64.sh ${id}`,
      `qemu-system-x86_64 -nodefaults ${id}`, // identity not first
      `qemu-system-x86_64 ${id}.old -nodefaults`, // another pid file
      `qemu-system-x86_64 ${qemuIdentityArgs('/data/sandboxes/t10').join(' ')}`,
      `qemu-system-x86_64 -name factory-t1 -pidfile /other/t1/qemu.pid`,
      '[qemu-system-x86] <defunct>',
      '',
    ]) {
      expect(commandIsOurQemu(other, dir), other).toBe(false);
    }
  });
});
