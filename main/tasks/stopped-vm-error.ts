// A run cut because its VM died (QEMU killed, out of memory) fails as
// SandboxStopped, not with whatever the SSH library said ("No response from
// server"). Found by the soak (issue 30, seed 3): QEMU SIGKILLed while seeding.
import { FactoryError } from '../../common/errors.js';

/** How long the VM's exit may lag the SSH error it caused. */
const EXIT_GRACE_MS = 2000;

export async function stoppedVmError(phase: string, vm: { exited: Promise<void> } | undefined, err: unknown, graceMs = EXIT_GRACE_MS): Promise<unknown> {
  if (err instanceof FactoryError || !vm) return err;
  let timer: NodeJS.Timeout | undefined;
  const exited = await Promise.race([
    vm.exited.then(() => true, () => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), graceMs))),
  ]);
  clearTimeout(timer);
  if (!exited) return err;
  const said = err instanceof Error ? err.message : String(err);
  return new FactoryError('SandboxStopped', `the sandbox's VM stopped while the task was ${phase} (${said})`);
}
