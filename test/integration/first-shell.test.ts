// A restored sandbox's first shell over its identity port (real QEMU, the
// cached base image, the app's snapshot template): the shell a user gets from
// a quick sandbox before the sandbox's SSH login is done. It must be a real
// login shell on a pty (typing, resizing, exit status), stop the guest when the
// host stops reading, end on kill, and leave SSH working as before. The shell is
// started in the snapshot template, so two clones must still differ in what a
// shell makes of randomness.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GUEST_NODE_GYP_DIR } from '../../main/guest/guest-shell.js';
import type { TerminalSource } from '../../main/terminal/types.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import { appPaths } from '../../main/state/paths.js';
import { testImage } from '../support/image.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a terminal would see of a source: its bytes and how it ended. */
class Screen {
  text = '';
  bytes = 0;
  exit: { code: number | null; lost: boolean } | undefined;
  constructor(readonly source: TerminalSource) {
    source.onData((chunk) => {
      this.bytes += chunk.length;
      // Only the tail is kept: a flood would make every wait slow.
      this.text = (this.text + chunk.toString('utf8')).slice(-20_000);
    });
    source.onExit((code, lost) => (this.exit = { code, lost }));
  }
  async waitFor(pattern: RegExp, timeoutMs = 30_000): Promise<RegExpExecArray> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const m = pattern.exec(this.text);
      if (m) return m;
      if (Date.now() > until) throw new Error(`no ${pattern} in the shell's output: ${JSON.stringify(this.text.slice(-400))}`);
      await sleep(20);
    }
  }
  async waitExit(timeoutMs = 30_000): Promise<{ code: number | null; lost: boolean }> {
    const until = Date.now() + timeoutMs;
    while (!this.exit) {
      if (Date.now() > until) throw new Error('the shell did not end');
      await sleep(20);
    }
    return this.exit;
  }
}

describe("a restored sandbox's first shell", () => {
  let image: BaseImage;
  let root: string;
  let driver: QemuDriver;
  const vms: RunningVm[] = [];

  beforeAll(async () => {
    image = await testImage();
    root = await mkdtemp(path.join(os.tmpdir(), 'first-shell-'));
    driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });
    expect(await driver.prepareFastBoot(image, { memoryMb: 1024, cpus: 2 })).toBe(true);
  }, 600_000);
  afterAll(async () => {
    for (const vm of vms) await vm.destroy();
    if (root) await rm(root, { recursive: true, force: true });
  });

  async function startWithShell(name: string): Promise<{ vm: RunningVm; screen: Screen; shellFirst: boolean }> {
    let screen: Screen | undefined;
    let startReturned = false;
    let shellFirst = false;
    const vm = await driver.start({
      sandboxDir: path.join(root, name),
      image,
      memoryMb: 1024,
      cpus: 2,
      firstShell: {
        cols: 100,
        rows: 30,
        ready: (source) => {
          shellFirst = !startReturned;
          screen = new Screen(source);
        },
      },
    });
    startReturned = true;
    vms.push(vm);
    expect(vm.bootMode, `the snapshot did not restore: ${driver.lastFastBootError?.message}`).toBe('snapshot');
    expect(screen, 'the first shell was never handed over').toBeDefined();
    return { vm, screen: screen!, shellFirst };
  }

  it('is root’s login shell on a pty before start() returns, follows a resize, ends with its status, and SSH still works', async () => {
    const { vm, screen, shellFirst } = await startWithShell('typing');
    expect(shellFirst).toBe(true);
    await screen.waitFor(/# $/);
    screen.source.write('echo "$((6*7)) $(id -u) $(tty) $HOME $SSH_CONNECTION."\r');
    await screen.waitFor(/42 0 \/dev\/pts\/\d+ \/root \./);
    expect(screen.text).toContain('\x1b[?2004h'); // readline is running: an interactive shell
    screen.source.write('stty size\r');
    await screen.waitFor(/[\r\n]30 100\r\n/);
    screen.source.resize(120, 40);
    screen.source.write('stty size\r');
    await screen.waitFor(/[\r\n]40 120\r\n/);
    const ssh = await vm.ssh();
    const viaSsh = await ssh.run('cat /etc/machine-id', { timeoutMs: 30_000 });
    // The login environment an SSH session gets from the image (node-gyp's header folder) is the first shell's too.
    const gypViaSsh = await ssh.run(`echo "gyp=$${GUEST_NODE_GYP_DIR.name}."`, { timeoutMs: 30_000 });
    ssh.close();
    expect(viaSsh.code).toBe(0);
    expect(gypViaSsh.stdout.trim()).toBe(`gyp=${GUEST_NODE_GYP_DIR.value}.`);
    screen.source.write('cat /etc/machine-id\r');
    await screen.waitFor(new RegExp(`[\\r\\n]${viaSsh.stdout.trim()}\\r\\n`));
    screen.source.write(`echo "gyp=$${GUEST_NODE_GYP_DIR.name}."\r`);
    await screen.waitFor(new RegExp(`[\\r\\n]gyp=${GUEST_NODE_GYP_DIR.value}\\.\\r\\n`));
    screen.source.write('exit 3\r');
    expect(await screen.waitExit()).toEqual({ code: 3, lost: false });
  }, 180_000);

  it('differs between two clones although it was started in their template: $RANDOM, $SRANDOM, the machine id', async () => {
    const seen: string[] = [];
    for (const name of ['clone-a', 'clone-b']) {
      const { vm, screen } = await startWithShell(name);
      await screen.waitFor(/# $/);
      screen.source.write('echo "R=$RANDOM,$RANDOM S=$SRANDOM M=$(cat /etc/machine-id)."\r');
      seen.push((await screen.waitFor(/R=(\d+,\d+) S=(\d+) M=([0-9a-f]{32})\./))[0]);
      await vm.destroy();
    }
    const [a, b] = seen.map((line) => /R=(\d+,\d+) S=(\d+) M=([0-9a-f]{32})/.exec(line)!.slice(1));
    expect(a![0], 'bash’s $RANDOM').not.toBe(b![0]);
    expect(a![1], 'bash’s $SRANDOM').not.toBe(b![1]);
    expect(a![2], 'the machine id').not.toBe(b![2]);
  }, 180_000);

  it('holds the guest while the host does not read, ends on kill, and is lost when the VM goes', async () => {
    const { vm, screen } = await startWithShell('flow');
    await screen.waitFor(/# $/);
    screen.source.pause();
    screen.source.write('head -c 3000000 /dev/zero | tr "\\0" x; echo; echo FLOOD-DONE\r');
    await sleep(3000);
    const whilePaused = screen.bytes;
    await sleep(1000);
    // Held: nothing more arrives, and far less than the flood came through.
    expect(screen.bytes).toBe(whilePaused);
    expect(whilePaused).toBeLessThan(1_000_000);
    screen.source.resume();
    await screen.waitFor(/FLOOD-DONE\r\n/, 120_000);
    expect(screen.bytes).toBeGreaterThan(3_000_000);
    screen.source.write('sleep 600\r');
    await sleep(500);
    screen.source.kill();
    expect(await screen.waitExit()).toEqual({ code: null, lost: false });
    // A second sandbox's first shell, then its VM goes away under it.
    const second = await startWithShell('lost');
    await second.screen.waitFor(/# $/);
    await second.vm.destroy();
    expect(await second.screen.waitExit()).toEqual({ code: null, lost: true });
    await vm.destroy();
  }, 300_000);
});
