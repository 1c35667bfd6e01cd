// A sandbox started as the app starts one (real QEMU, restored from the image's
// snapshot): under software emulation its processes map code at fixed
// addresses, so the emulator reuses what it translated for one start of a
// program in the next (test/bench/process-start.bench.ts measures what that
// saves); under KVM the guest keeps the kernel's randomisation. And the login
// shell the identity waiter runs as a warm-up is gone once the sandbox is up.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appPaths } from '../../main/state/paths.js';
import { AccelProbe, type AccelChoice } from '../../main/vm/accel-probe.js';
import type { BaseImage } from '../../main/vm/image-store.js';
import { QemuDriver, type RunningVm } from '../../main/vm/qemu-driver.js';
import { testImage } from '../support/image.js';

describe('a started sandbox’s processes', () => {
  let image: BaseImage;
  let accel: AccelChoice;
  let root: string;
  let vm: RunningVm | undefined;
  const driver = new QemuDriver({ snapshotsDir: appPaths().snapshots });

  beforeAll(async () => {
    image = await testImage();
    accel = await AccelProbe.cached();
    root = await mkdtemp(path.join(os.tmpdir(), 'fixed-addresses-'));
    vm = await driver.start({ sandboxDir: path.join(root, 'vm'), image, fastBoot: true });
  });
  afterAll(async () => {
    await vm?.destroy();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('map libc at one address in every process under emulation, at random ones under KVM', async () => {
    expect(vm!.bootMode, `fast boot failed: ${driver.lastFastBootError?.message}`).toBe('snapshot');
    const ssh = await vm!.ssh();
    try {
      const r = await ssh.run('cat /proc/sys/kernel/randomize_va_space; for i in 1 2 3; do grep -m1 "/libc\\.so" /proc/self/maps; done');
      expect(r.code, r.stderr).toBe(0);
      const [setting, ...maps] = r.stdout.trim().split('\n');
      expect(maps).toHaveLength(3);
      const starts = new Set(maps.map((line) => line.split('-')[0]));
      if (accel.accel === 'tcg') {
        expect(setting).toBe('0');
        expect(starts.size).toBe(1);
      } else {
        expect(setting).toBe('2');
        expect(starts.size).toBeGreaterThan(1);
      }
    } finally {
      ssh.close();
    }
  });

  it('hold no warm-up shell and no identity waiter once the sandbox is up', async () => {
    const ssh = await vm!.ssh();
    try {
      // Each process's argv[0]; this command's own shell is "bash", a login shell "-bash".
      const list = 'for p in /proc/[0-9]*; do [ "$p" = /proc/$$ ] || { tr "\\0" " " < $p/cmdline; echo; }; done 2>/dev/null';
      let left: string[] = [];
      // The warm-up may still be ending on a loaded host: it must be gone within seconds, not linger.
      for (const until = Date.now() + 10_000; ; ) {
        const commands = (await ssh.run(list)).stdout.split('\n').filter(Boolean);
        expect(commands.some((c) => c.startsWith('sshd'))).toBe(true);
        left = commands.filter((c) => c.startsWith('-bash') || c.startsWith('perl'));
        if (!left.length || Date.now() > until) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(left).toEqual([]);
    } finally {
      ssh.close();
    }
  });
});
