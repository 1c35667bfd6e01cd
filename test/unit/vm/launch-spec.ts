// A sandbox's QEMU launch spec with made-up paths, for the command-line tests.
import type { QemuLaunchSpec } from '../../../main/vm/qemu-args.js';

export function launchSpec(overrides: Partial<QemuLaunchSpec> = {}): QemuLaunchSpec {
  return {
    name: 'factory-sb',
    accel: { accel: 'tcg', cpu: 'max', reason: 'test' },
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
