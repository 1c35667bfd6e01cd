// Tearing a sandbox down when its VM cannot be fully deleted (its disk folder
// made unwritable, a full disk): the error still reaches the caller, but the
// sandbox's extensions (the credential proxy) are released and the sandbox is
// no longer registered. The VM is a double: a QEMU whose disk deletion fails
// cannot be made here without root; the rest is the real provisioner.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { createFileLogger } from '../../../main/log/logger.js';
import { LiveSandboxes } from '../../../main/sandbox/live-sandboxes.js';
import { SandboxProvisioner } from '../../../main/tasks/sandbox-provisioner.js';
import type { RunningVmPort } from '../../../main/sandbox/sandbox-ports.js';
import { appPaths } from '../../../main/state/paths.js';
import { killLeftoverQemu } from '../../../main/vm/leftover-qemu.js';
import { SettingsSchema } from '../../../main/state/settings.js';
import { tempDir } from '../../support/repo.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

describe('sandbox teardown', () => {
  it('releases the extensions and forgets the sandbox even when the VM cannot be deleted', async () => {
    const dataDir = tempDir();
    cleanups.push(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const never = () => {
      throw new Error('no VM in this test');
    };
    const live = new LiveSandboxes();
    const provisioner = new SandboxProvisioner({
      paths: appPaths({ FACTORY_DATA_DIR: dataDir, FACTORY_CACHE_DIR: path.join(dataDir, 'cache') }),
      settings: () => SettingsSchema.parse({}),
      images: { status: () => ({ state: 'missing', version: 'test' }), ensure: never },
      qemu: { checkInstalled: async () => ({ ok: true }), start: never },
      live,
      emit: () => {},
      killLeftovers: killLeftoverQemu,
      log: createFileLogger({ dir: path.join(dataDir, 'logs') }),
    });
    const released: string[] = [];
    const sandbox = provisioner.open({ id: 'abcdefgh', repoPath: dataDir, allowPush: false });
    sandbox.extensions.push({ name: 'credentials', prepare: async () => ({}), release: async ({ taskId }) => void released.push(taskId) });
    const vm: RunningVmPort = {
      pid: 1, accel: 'tcg', sshPort: 1, bootMs: 1, sandboxDir: sandbox.sandboxDir,
      ssh: never, stop: async () => {}, serialTail: () => '', exited: Promise.resolve(),
      destroy: async () => {
        throw Object.assign(new Error('EACCES: permission denied, unlink overlay.qcow2'), { code: 'EACCES' });
      },
    };
    sandbox.vm = vm;
    await expect(provisioner.teardown(sandbox)).rejects.toThrow(/EACCES/);
    expect(released).toEqual(['abcdefgh']);
    expect(live.get('abcdefgh')).toBeUndefined();
    expect(sandbox.vm).toBeUndefined();
  });
});
