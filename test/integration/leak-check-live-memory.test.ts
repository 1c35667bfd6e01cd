// The leak check reads a running sandbox's memory out of its QEMU process (real
// QEMU, a sandbox restored from the image's snapshot as the app starts one): a
// value a guest process holds is found, the VM is paused only while its memory
// is read and left as it was, and anything that makes the direct read unsafe
// (another process's id) falls back to QEMU's dump with a note saying why.
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemorySecretStore } from '../../main/credentials/keychain.js';
import { dumpGuestMemoryWith, LeakChecker, type LeakCheckSources, type QmpExecutor } from '../../main/credentials/leak-check.js';
import { appPaths } from '../../main/state/paths.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import type { SandboxSsh } from '../../main/ssh/sandbox-ssh.js';
import { testImage } from '../support/image.js';

const MEMORY_MB = 1024;
const KEY = `sk-ant-api03-live${Math.random().toString(36).slice(2)}${Date.now().toString(36)}QmZ`;
const SPLIT = `ghp_split${Math.random().toString(36).slice(2)}${Date.now().toString(36)}Xy9`;

describe('the leak check of a running sandbox’s memory', () => {
  let root: string;
  let vm: RunningVm;
  let ssh: SandboxSsh;
  let qmp: QmpExecutor;
  const commands: string[] = [];
  const checker = async () => {
    const secrets = new MemorySecretStore();
    await secrets.put('key', KEY);
    await secrets.put('split', SPLIT);
    return new LeakChecker({ secrets });
  };
  const status = async () => ((await qmp.execute('query-status')) as { status: string }).status;

  beforeAll(async () => {
    const image = await testImage();
    root = await mkdtemp(path.join(os.tmpdir(), 'leak-live-'));
    vm = await new QemuDriver({ snapshotsDir: appPaths().snapshots }).start({ sandboxDir: path.join(root, 'vm'), image, memoryMb: MEMORY_MB, cpus: 2 });
    expect(vm.bootMode).toBe('snapshot'); // its RAM a private mapping of the template's memory file
    ssh = await vm.ssh();
    const own = await vm.qmp();
    // The VM's own QMP client, every command it is sent noted.
    qmp = { execute: (c, a) => (commands.push(a?.['command-line'] ? `${c} ${String(a['command-line'])}` : c), own.execute(c, a)) };
    // A process holds the key (decoded at run time, so it is on no disk): bash waits for its sleep,
    // since bash -c would exec a last command in its own place and free the memory holding the key.
    // A file in shared memory holds the other value across its first page boundary, on two pages of
    // the guest's page cache.
    const planted = await ssh.run(
      `setsid bash -c 'k=$(printf %s ${Buffer.from(KEY).toString('base64')} | base64 -d); echo "$k" > /dev/null; touch /tmp/held; sleep 600 & wait' </dev/null >/dev/null 2>&1 & ` +
        `{ head -c 4090 /dev/zero | tr '\\0' 'p'; printf %s ${Buffer.from(SPLIT).toString('base64')} | base64 -d; } > /dev/shm/straddle; ` +
        `for i in $(seq 1 100); do [ -e /tmp/held ] && break; sleep 0.1; done; echo ok`,
    );
    expect(planted.stdout.trim()).toBe('ok');
  }, 600_000);
  afterAll(async () => {
    ssh?.close();
    await vm?.destroy();
    if (root) await rm(root, { recursive: true, force: true });
  });

  const check = async (sources: Partial<LeakCheckSources>) =>
    (await checker()).check({ sandboxId: 'live', credentials: [{ id: 'key' }, { id: 'split' }], sources: { workDir: path.join(root, 'vm'), ...sources } });

  it('finds what a guest process holds, read from QEMU’s process with the VM paused, and resumes it', async () => {
    commands.length = 0;
    const t0 = performance.now();
    const report = await check({ liveMemory: { qmp: async () => qmp, qemuPid: vm.pid } });
    console.log(`live memory check: ${Math.round(performance.now() - t0)} ms, ${JSON.stringify(report.scanned)}`);
    const memory = report.scanned.find((s) => s.source === 'guest memory')!;
    expect(memory.error).toBeUndefined();
    expect(memory.note).toBeUndefined(); // no note: read in place, not dumped
    expect(memory.bytes).toBe(MEMORY_MB * 1024 * 1024);
    const hits = report.hits.filter((h) => h.source === 'memory');
    expect(hits.some((h) => h.credentialId === 'key' && h.encoding === 'raw')).toBe(true);
    // Across a page boundary of the file: two physical pages, adjacent in ram0 or found at the page edges.
    const split = hits.filter((h) => h.credentialId === 'split').map((h) => h.encoding);
    console.log(`the value across a page boundary: ${split.join(', ')}`);
    expect(split.some((e) => e === 'raw' || e === 'raw+page-split')).toBe(true);
    expect(report.verdict).toBe('leak');
    expect(JSON.stringify(report)).not.toContain(KEY);
    // Paused for the read, resumed after; nothing dumped into the sandbox folder.
    expect(commands.filter((c) => ['stop', 'cont', 'dump-guest-memory'].includes(c))).toEqual(['stop', 'cont']);
    expect(await status()).toBe('running');
    expect((await readdir(path.join(root, 'vm'))).filter((f) => f.endsWith('.dump'))).toEqual([]);
    expect((await ssh.run('echo alive')).stdout.trim()).toBe('alive');
  });

  it('leaves a paused VM paused', async () => {
    await qmp.execute('stop');
    try {
      commands.length = 0;
      const report = await check({ liveMemory: { qmp: async () => qmp, qemuPid: vm.pid } });
      expect(report.hits.some((h) => h.source === 'memory' && h.credentialId === 'key')).toBe(true);
      expect(commands.filter((c) => c === 'stop' || c === 'cont')).toEqual([]);
      expect(await status()).toBe('paused');
    } finally {
      await qmp.execute('cont');
    }
  });

  it('dumps through QMP instead when the process id is not that VM’s QEMU, and says why', async () => {
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      commands.length = 0;
      const report = await check({
        liveMemory: { qmp: async () => qmp, qemuPid: other.pid! },
        dumpMemory: async (f) => dumpGuestMemoryWith(qmp, f),
      });
      const memory = report.scanned.find((s) => s.source === 'guest memory')!;
      expect(memory.note).toBe(`dumped through QMP: process ${other.pid} does not map ram0 where QEMU says it is`);
      expect(report.hits.some((h) => h.source === 'memory' && h.credentialId === 'key' && h.encoding === 'raw')).toBe(true);
      // Nothing was read from the wrong process, and the VM was never paused for it.
      expect(commands.filter((c) => c === 'stop' || c === 'cont')).toEqual([]);
      expect(commands).toContain('dump-guest-memory');
      expect(await status()).toBe('running');
    } finally {
      other.kill('SIGKILL');
    }
  });

  it('without a dump to fall back on, an unreadable memory makes the check incomplete, never clean', async () => {
    const report = await check({ liveMemory: { qmp: async () => qmp, qemuPid: 999_999_999 } });
    expect(report.scanned.find((s) => s.source === 'guest memory')!.error).toBe('not scanned: the memory map of process 999999999 cannot be read: ENOENT, and no dump was offered');
    expect(report.verdict).not.toBe('clean');
  });

  // Last: it ends the VM.
  it('a VM that dies while its memory is read makes the check incomplete, naming the read and the resume', async () => {
    const dying: QmpExecutor = {
      async execute(command, args) {
        const r = await qmp.execute(command, args);
        if (command === 'stop') process.kill(vm.pid, 'SIGKILL');
        return r;
      },
    };
    const report = await check({ liveMemory: { qmp: async () => dying, qemuPid: vm.pid } });
    const memory = report.scanned.find((s) => s.source === 'guest memory')!;
    console.log(`the VM killed mid-check: ${memory.error}`);
    expect(memory.error).toMatch(/QEMU's memory (ended|cannot be read)/);
    expect(memory.error).toContain('the VM could not be resumed after the read');
    expect(report.verdict).toBe('incomplete');
  });
});
