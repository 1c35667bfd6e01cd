import { describe, expect, it } from 'vitest';
import { AccelProbe, decideAccel, PROBE_SUCCESS_CODE, probeBootSector, type ProbeRunner } from '../../../main/vm/accel-probe.js';

function probeWith(outcome: Awaited<ReturnType<ProbeRunner>>, opts: { kvm?: boolean; platform?: NodeJS.Platform } = {}) {
  const calls: string[][] = [];
  const runner: ProbeRunner = async (_bin, args) => {
    calls.push(args);
    return outcome;
  };
  const probe = new AccelProbe({ runner, platform: opts.platform ?? 'linux', kvmDeviceUsable: async () => opts.kvm ?? true, timeoutMs: 500 });
  return { probe, calls };
}

describe('accel probe', () => {
  it('uses KVM with -cpu host when the probe guest runs', async () => {
    const { probe, calls } = probeWith({ kind: 'exited', code: PROBE_SUCCESS_CODE, signal: null, stderr: '' });
    expect(await probe.probe()).toMatchObject({ accel: 'kvm', cpu: 'host' });
    expect(calls[0]).toEqual(expect.arrayContaining(['-accel', 'kvm', '-cpu', 'host']));
  });

  it('falls back to TCG with -cpu max when QEMU aborts on an MSR', async () => {
    const { probe } = probeWith({
      kind: 'exited',
      code: null,
      signal: 'SIGABRT',
      stderr: 'qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\nkvm_buf_set_msrs: Assertion failed.',
    });
    const choice = await probe.probe();
    expect(choice).toMatchObject({ accel: 'tcg', cpu: 'max' });
    expect(choice.reason).toMatch(/SIGABRT.*MSR 0x10a/);
  });

  it('falls back to TCG when the probe guest hangs', async () => {
    const { probe } = probeWith({ kind: 'timeout', stderr: '' });
    const choice = await probe.probe();
    expect(choice).toMatchObject({ accel: 'tcg', cpu: 'max' });
    expect(choice.reason).toMatch(/did not finish within 500 ms/);
  });

  it('falls back to TCG without probing when /dev/kvm is unusable', async () => {
    const { probe, calls } = probeWith({ kind: 'exited', code: PROBE_SUCCESS_CODE, signal: null, stderr: '' }, { kvm: false });
    expect(await probe.probe()).toMatchObject({ accel: 'tcg', cpu: 'max', reason: expect.stringMatching(/\/dev\/kvm/) });
    expect(calls).toEqual([]);
  });

  it('probes HVF on macOS and uses TCG elsewhere', async () => {
    const mac = probeWith({ kind: 'exited', code: PROBE_SUCCESS_CODE, signal: null, stderr: '' }, { platform: 'darwin' });
    expect(await mac.probe.probe()).toMatchObject({ accel: 'hvf' });
    const win = probeWith({ kind: 'exited', code: PROBE_SUCCESS_CODE, signal: null, stderr: '' }, { platform: 'win32' });
    expect(await win.probe.probe()).toMatchObject({ accel: 'tcg', cpu: 'max' });
  });

  it('uses a forced accelerator without probing, saying who forced it', async () => {
    const runner: ProbeRunner = async () => {
      throw new Error('must not probe');
    };
    const kvmDeviceUsable = async () => {
      throw new Error('must not look at /dev/kvm');
    };
    const tcg = new AccelProbe({ runner, kvmDeviceUsable, forced: { accel: 'tcg', reason: 'FACTORY_ACCEL=tcg' } });
    expect(await tcg.probe()).toEqual({ accel: 'tcg', cpu: 'max', reason: 'FACTORY_ACCEL=tcg' });
    const kvm = new AccelProbe({ runner, kvmDeviceUsable, forced: { accel: 'kvm', reason: 'FACTORY_ACCEL=kvm' } });
    expect(await kvm.probe()).toEqual({ accel: 'kvm', cpu: 'host', reason: 'FACTORY_ACCEL=kvm' });
    // A forced choice is not cached as the probe's answer for that QEMU binary.
    const binary = '/nonexistent/qemu-for-forced-test';
    expect(await AccelProbe.cached({ qemuBinary: binary, forced: { accel: 'hvf', reason: 'test' } })).toMatchObject({ accel: 'hvf' });
    expect(await AccelProbe.cached({ qemuBinary: binary, forced: { accel: 'tcg', reason: 'test' } })).toMatchObject({ accel: 'tcg' });
  });

  it('ignores FACTORY_ACCEL in its own environment: only the caller forces a choice', async () => {
    const saved = process.env.FACTORY_ACCEL;
    process.env.FACTORY_ACCEL = 'tcg';
    try {
      const { probe, calls } = probeWith({ kind: 'exited', code: PROBE_SUCCESS_CODE, signal: null, stderr: '' });
      expect(await probe.probe()).toMatchObject({ accel: 'kvm', cpu: 'host' });
      expect(calls).toHaveLength(1);
    } finally {
      if (saved === undefined) delete process.env.FACTORY_ACCEL;
      else process.env.FACTORY_ACCEL = saved;
    }
  });

  it('treats any other exit code or a spawn failure as unusable', () => {
    expect(decideAccel('kvm', { kind: 'exited', code: 1, signal: null, stderr: 'oops' }, 1000)).toMatchObject({ accel: 'tcg' });
    expect(decideAccel('kvm', { kind: 'spawn-error', message: 'ENOENT' }, 1000).reason).toMatch(/ENOENT/);
  });

  it('the probe program is a valid boot sector writing to the debug-exit port', () => {
    const s = probeBootSector();
    expect(s.length).toBe(512);
    expect([s[510], s[511]]).toEqual([0x55, 0xaa]);
    expect([...s.subarray(0, 4)]).toEqual([0xb0, 0x31, 0xe6, 0xf4]);
    expect(((0x31 << 1) | 1) === PROBE_SUCCESS_CODE).toBe(true);
  });

  it('real probe on this machine: KVM only if a guest really ran, else TCG with the reason', async () => {
    const choice = await new AccelProbe({ timeoutMs: 8000 }).probe();
    if (choice.accel === 'kvm') expect(choice.reason).toMatch(/probe guest ran/);
    else {
      expect(choice).toMatchObject({ accel: 'tcg', cpu: 'max' });
      // The reason names what was wrong with KVM, not just that something was.
      expect(choice.reason).toMatch(/^(KVM is unusable: .+|\/dev\/kvm is missing or not accessible)$/);
    }
    console.log(`accel probe: ${choice.accel} (${choice.reason})`);
  }, 30_000);
});
