// A sandbox's QEMU launch spec with made-up paths, for the command-line tests,
// and the machine such a sandbox is, for the machine key tests.
import type { QemuLaunchSpec } from '../../../main/vm/qemu-args.js';
import type { MachineFields } from '../../../main/vm/warm-state.js';

/** A 1 GiB, 2-CPU TCG machine on made-up image paths. */
export const testMachine: MachineFields = {
  accel: { accel: 'tcg', cpu: 'max' },
  memoryMb: 1024,
  cpus: 2,
  image: { kernel: '/img/vmlinuz', initrd: '/img/initrd.img', disk: '/img/disk.qcow2' },
  cmdline: 'root=/dev/vda console=ttyS0',
};

export function launchSpec(overrides: Partial<QemuLaunchSpec> = {}): QemuLaunchSpec {
  return {
    name: 'factory-sb',
    accel: { accel: 'tcg', cpu: 'max', reason: 'test' },
    tcgThreads: 'multi',
    memoryMb: 2048,
    cpus: 2,
    kernel: '/img/vmlinuz',
    initrd: '/img/initrd.img',
    cmdline: 'root=/dev/vda console=ttyS0',
    overlay: '/sb/overlay.qcow2',
    sshPort: 40022,
    guestForwards: [],
    serialLog: '/sb/serial.log',
    qmpSocket: '/sb/qmp.sock',
    identitySocket: '/sb/identity.sock',
    pidFile: '/sb/qemu.pid',
    fwCfg: [],
    ...overrides,
  };
}
