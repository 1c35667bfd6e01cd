// A run whose VM died fails by name (SandboxStopped), whatever SSH said.
// Found by the soak (issue 30, seed 3): QEMU SIGKILLed while the task was
// seeding left the task failed with "Error: No response from server".
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { FactoryError } from '../../../common/errors.js';
import { stoppedVmError } from '../../../main/tasks/stopped-vm-error.js';

/** A real process standing in for QEMU: `exited` settles when it ends, as the driver's does. */
function vmProcess() {
  const child = spawn('sleep', ['300'], { stdio: 'ignore' });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return { child, vm: { exited } };
}

describe('stoppedVmError', () => {
  it('names an SSH error SandboxStopped when the VM was killed under it', async () => {
    const { child, vm } = vmProcess();
    child.kill('SIGKILL');
    const err = await stoppedVmError('seeding', vm, new Error('No response from server'));
    expect(err).toBeInstanceOf(FactoryError);
    expect(err).toMatchObject({ name: 'SandboxStopped', message: expect.stringMatching(/stopped while the task was seeding \(No response from server\)/) });
  });

  it('waits a moment for an exit that lags the SSH error', async () => {
    const { child, vm } = vmProcess();
    const named = stoppedVmError('running', vm, new Error('read ECONNRESET'), 10_000);
    child.kill('SIGKILL');
    expect(await named).toMatchObject({ name: 'SandboxStopped' });
  });

  it('leaves the error as it was while the VM runs, and a named error always', async () => {
    const { child, vm } = vmProcess();
    try {
      const plain = new Error('git clone failed');
      expect(await stoppedVmError('seeding', vm, plain, 50)).toBe(plain);
      const named = new FactoryError('GitFailed', 'clone refused');
      child.kill('SIGKILL');
      expect(await stoppedVmError('seeding', vm, named)).toBe(named);
      expect(await stoppedVmError('seeding', undefined, plain)).toBe(plain);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
