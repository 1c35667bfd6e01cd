import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildQemuArgs, discardProblem, MACHINE_DEVICES, TCG_CACHE_MB, tcgThreads } from '../../../main/vm/qemu-args.js';
import { launchSpec, testMachine } from './launch-spec.js';
import { machineKey } from '../../../main/vm/warm-state.js';

const spec = launchSpec({ memoryMb: 1024 });

const machine = testMachine;

const devices = (args: string[]) => args.flatMap((a, i) => (a === '-device' ? [args[i + 1]!] : []));

/** Splits a QEMU option string at single commas (",," is a literal comma). */
function options(value: string): string[] {
  return value.split(/(?<!,),(?!,)/);
}

/** A balloon with free page reporting: what a sandbox does NOT get (see below). */
const BALLOON = 'virtio-balloon-pci,id=balloon0,free-page-reporting=on';

describe('the devices on the QEMU command line', () => {
  afterEach(() => {
    vi.doUnmock('../../../main/vm/qemu-args.js');
    vi.resetModules();
  });

  it('gives a sandbox no balloon: a clone maps the template\'s RAM file, where free page reporting would punch holes', () => {
    const args = buildQemuArgs(spec);
    expect(devices(args)).toEqual([...MACHINE_DEVICES]);
    expect(devices(args).filter((d) => d.startsWith('virtio-balloon'))).toEqual([]);
    expect(discardProblem(args)).toBeUndefined();
  });

  it('keeps the device list out of reach of a path with commas', () => {
    const hostile = '/x,id=balloon0,free-page-reporting=on/overlay.qcow2';
    const args = buildQemuArgs({ ...spec, overlay: hostile, serialLog: '/s,-device,virtio-balloon-pci', qmpSocket: '/q,,id=x' });
    expect(devices(args)).toEqual([...MACHINE_DEVICES]);
  });

  it('gives a machine with another device list another key (a state saved with other devices does not load)', async () => {
    const today = machineKey(machine, '7.2.22', 'qemu-system-x86_64');
    vi.resetModules();
    vi.doMock('../../../main/vm/qemu-args.js', async (importOriginal) => ({
      ...(await importOriginal<typeof import('../../../main/vm/qemu-args.js')>()),
      MACHINE_DEVICES: [...MACHINE_DEVICES, BALLOON],
    }));
    const other = await import('../../../main/vm/warm-state.js');
    const withBalloon = other.machineKey(machine, '7.2.22', 'qemu-system-x86_64');
    expect(withBalloon).toMatch(/^[0-9a-f]{16}$/);
    expect(withBalloon).not.toBe(today);
    // And the key is stable for the same machine.
    expect(other.machineKey(machine, '7.2.22', 'qemu-system-x86_64')).toBe(withBalloon);
  });
});

describe('free page reporting and guest RAM mapped from a file', () => {
  const balloonArgs = [...buildQemuArgs(spec), '-device', BALLOON];
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
    const noBalloon = balloonArgs.map((a) => (a === BALLOON ? 'virtio-balloon-pci,id=balloon0' : a));
    expect(discardProblem([...noBalloon, '-object', 'memory-backend-file,id=ram0,mem-path=/snap/ram,share=off'])).toBeUndefined();
  });
});

describe('the translation cache under software emulation', () => {
  const accelOf = (args: string[]) => args[args.indexOf('-accel') + 1]!;

  it('caps QEMU\'s translation cache of a TCG sandbox, which otherwise grows with every program the guest runs', () => {
    const parts = options(accelOf(buildQemuArgs(spec)));
    expect(parts[0]).toBe('tcg');
    expect(parts).toContain(`tb-size=${TCG_CACHE_MB}`);
    // Below 128 MiB the agent CLIs ran up to twice as slow; QEMU's own default is 1 GiB.
    expect(TCG_CACHE_MB).toBeGreaterThanOrEqual(128);
    expect(TCG_CACHE_MB).toBeLessThan(1024);
  });

  it('runs each vCPU on a thread of its own only when two sandboxes\' vCPUs each have a core', () => {
    expect(options(accelOf(buildQemuArgs({ ...spec, tcgThreads: 'multi' })))).toContain('thread=multi');
    expect(options(accelOf(buildQemuArgs({ ...spec, tcgThreads: 'single' })))).toContain('thread=single');
    // Two 2-vCPU sandboxes on 2 cores would take turns on them: one thread each (test/bench/tcg-threads.bench.ts).
    expect(tcgThreads(2, 2)).toBe('single');
    expect(tcgThreads(2, 3)).toBe('single');
    expect(tcgThreads(2, 4)).toBe('multi');
    expect(tcgThreads(4, 8)).toBe('multi');
    expect(tcgThreads(4, 6)).toBe('single');
    expect(tcgThreads(1, 64)).toBe('single');
  });

  it('gives KVM and HVF, which translate nothing, no TCG options', () => {
    expect(accelOf(buildQemuArgs({ ...spec, accel: { accel: 'kvm', cpu: 'host', reason: 'probe ran' } }))).toBe('kvm');
    expect(accelOf(buildQemuArgs({ ...spec, accel: { accel: 'hvf', cpu: 'host', reason: 'macOS' } }))).toBe('hvf');
  });
});
