import { afterEach, describe, expect, it, vi } from 'vitest';
import { BALLOON_DEVICE, buildQemuArgs, discardProblem, MACHINE_DEVICES, TCG_CACHE_MB, type QemuLaunchSpec } from '../../../main/vm/qemu-args.js';
import { machineKey, type MachineFields } from '../../../main/vm/warm-state.js';

const spec: QemuLaunchSpec = {
  name: 'factory-sb',
  accel: { accel: 'tcg', cpu: 'max', reason: 'test' },
  memoryMb: 1024,
  cpus: 2,
  kernel: '/img/vmlinuz',
  initrd: '/img/initrd.img',
  cmdline: 'root=/dev/vda console=ttyS0',
  overlay: '/sb/overlay.qcow2',
  sshPort: 40022,
  guestForwards: [],
  serialLog: '/sb/serial.log',
  qmpSocket: '/sb/qmp.sock',
  pidFile: '/sb/qemu.pid',
  fwCfg: [],
};

const machine: MachineFields = {
  accel: { accel: 'tcg', cpu: 'max' },
  memoryMb: 1024,
  cpus: 2,
  image: { kernel: '/img/vmlinuz', initrd: '/img/initrd.img', disk: '/img/disk.qcow2' },
  cmdline: 'root=/dev/vda console=ttyS0',
};

const devices = (args: string[]) => args.flatMap((a, i) => (a === '-device' ? [args[i + 1]!] : []));

/** Splits a QEMU option string at single commas (",," is a literal comma). */
function options(value: string): string[] {
  return value.split(/(?<!,),(?!,)/);
}

describe('the memory balloon on the QEMU command line', () => {
  afterEach(() => {
    vi.doUnmock('../../../main/vm/qemu-args.js');
    vi.resetModules();
  });

  it('gives every sandbox one virtio balloon with free page reporting, so pages the guest frees go back to the host', () => {
    const balloons = devices(buildQemuArgs(spec)).filter((d) => d.startsWith('virtio-balloon'));
    expect(balloons).toHaveLength(1);
    const [driver, ...props] = options(balloons[0]!);
    expect(driver).toBe('virtio-balloon-pci');
    expect(props).toContain('free-page-reporting=on');
    // Never deflate-on-oom or a start size: the balloon is not meant to be inflated.
    expect(props.filter((p) => !/^(id|free-page-reporting)=/.test(p))).toEqual([]);
  });

  it('keeps the balloon a device of its own that a path with commas cannot reach or add options to', () => {
    const hostile = '/x,id=balloon0,free-page-reporting=off/overlay.qcow2';
    const args = buildQemuArgs({ ...spec, overlay: hostile, serialLog: '/s,free-page-reporting=off', qmpSocket: '/q,,id=x' });
    expect(devices(args)).toEqual([...MACHINE_DEVICES]);
    for (const value of args) {
      if (devices(args).includes(value)) continue;
      // Outside the device list, the balloon's option only appears inside an escaped path.
      for (const part of options(value)) expect(part).not.toMatch(/^(free-page-reporting|id=balloon0)/);
    }
    expect(args).toContain(BALLOON_DEVICE);
  });

  it('puts every device of the command line into the machine key, so no snapshot saved without the balloon is restored', () => {
    expect(devices(buildQemuArgs(spec))).toEqual([...MACHINE_DEVICES]);
    expect(MACHINE_DEVICES).toContain(BALLOON_DEVICE);
  });

  it('gives a machine with another device list another key (a state saved without the balloon does not load)', async () => {
    const withBalloon = machineKey(machine, '7.2.22', 'qemu-system-x86_64');
    vi.resetModules();
    vi.doMock('../../../main/vm/qemu-args.js', async (importOriginal) => ({
      ...(await importOriginal<typeof import('../../../main/vm/qemu-args.js')>()),
      MACHINE_DEVICES: MACHINE_DEVICES.filter((d) => d !== BALLOON_DEVICE),
    }));
    const older = await import('../../../main/vm/warm-state.js');
    const without = older.machineKey(machine, '7.2.22', 'qemu-system-x86_64');
    expect(without).toMatch(/^[0-9a-f]{16}$/);
    expect(without).not.toBe(withBalloon);
    // And the key is stable for the same machine.
    expect(older.machineKey(machine, '7.2.22', 'qemu-system-x86_64')).toBe(without);
  });
});

describe('free page reporting and guest RAM mapped from a file', () => {
  const balloonArgs = buildQemuArgs(spec);
  const withRam = (object: string) => [...balloonArgs, '-object', object, '-machine', 'memory-backend=ram0'];

  it('refuses a privately mapped RAM file next to free page reporting, which would punch holes in a snapshot other clones share', () => {
    expect(discardProblem(withRam('memory-backend-file,id=ram0,size=1024M,mem-path=/snap/ram,share=off'))).toMatch(/punch holes/);
    // share=off is QEMU's default.
    expect(discardProblem(withRam('memory-backend-file,id=ram0,size=1024M,mem-path=/snap/ram'))).toMatch(/punch holes/);
    expect(discardProblem([...balloonArgs, '-mem-path', '/snap/ram'])).toMatch(/punch holes/);
    // A path that merely contains "share=on" does not make the mapping shared.
    expect(discardProblem(withRam('memory-backend-file,id=ram0,mem-path=/snap/x,,share=on'))).toMatch(/punch holes/);
  });

  it('allows anonymous RAM, a shared RAM file (its holes are the guest\'s own), or a privately mapped file without free page reporting', () => {
    expect(discardProblem(balloonArgs)).toBeUndefined();
    expect(discardProblem(withRam('memory-backend-file,id=ram0,size=1024M,mem-path=/vm/ram,share=on'))).toBeUndefined();
    const noBalloon = balloonArgs.map((a) => (a === BALLOON_DEVICE ? 'virtio-balloon-pci,id=balloon0' : a));
    expect(discardProblem([...noBalloon, '-object', 'memory-backend-file,id=ram0,mem-path=/snap/ram,share=off'])).toBeUndefined();
  });
});

describe('the translation cache under software emulation', () => {
  const accelOf = (args: string[]) => args[args.indexOf('-accel') + 1]!;

  it('caps QEMU\'s translation cache of a TCG sandbox, which otherwise grows with every program the guest runs', () => {
    const parts = options(accelOf(buildQemuArgs(spec)));
    expect(parts[0]).toBe('tcg');
    expect(parts).toContain('thread=multi');
    expect(parts).toContain(`tb-size=${TCG_CACHE_MB}`);
    // Below 128 MiB the agent CLIs ran up to twice as slow; QEMU's own default is 1 GiB.
    expect(TCG_CACHE_MB).toBeGreaterThanOrEqual(128);
    expect(TCG_CACHE_MB).toBeLessThan(1024);
  });

  it('gives KVM and HVF, which translate nothing, no TCG options', () => {
    expect(accelOf(buildQemuArgs({ ...spec, accel: { accel: 'kvm', cpu: 'host', reason: 'probe ran' } }))).toBe('kvm');
    expect(accelOf(buildQemuArgs({ ...spec, accel: { accel: 'hvf', cpu: 'host', reason: 'macOS' } }))).toBe('hvf');
  });
});
