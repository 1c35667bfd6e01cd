// The VM knobs a user sets in the environment, read once by the composition
// root: a typo must stop the app with the variable's name, not be ignored.
import { describe, expect, it } from 'vitest';
import { vmSettingsFromEnv } from '../../../main/vm/vm-settings.js';

const paths = { snapshots: '/cache/snapshots' };

describe('VM settings from the environment', () => {
  it('fast boot from the snapshots folder and a probed accelerator by default', () => {
    expect(vmSettingsFromEnv({}, paths)).toEqual({ snapshotsDir: '/cache/snapshots' });
    expect(vmSettingsFromEnv({ FACTORY_FAST_BOOT: '1', FACTORY_ACCEL: '' }, paths)).toEqual({ snapshotsDir: '/cache/snapshots' });
  });

  it('FACTORY_FAST_BOOT=0 boots cold; FACTORY_ACCEL forces the accelerator and says so', () => {
    expect(vmSettingsFromEnv({ FACTORY_FAST_BOOT: '0', FACTORY_ACCEL: 'kvm' }, paths)).toEqual({
      snapshotsDir: false,
      forceAccel: { accel: 'kvm', reason: 'FACTORY_ACCEL=kvm' },
    });
  });

  it('rejects values it does not know, naming the variable', () => {
    expect(() => vmSettingsFromEnv({ FACTORY_ACCEL: 'KVM' }, paths)).toThrow(/FACTORY_ACCEL must be one of tcg, kvm, hvf, not "KVM"/);
    expect(() => vmSettingsFromEnv({ FACTORY_ACCEL: 'tcg,thread=single' }, paths)).toThrow(/FACTORY_ACCEL/);
    expect(() => vmSettingsFromEnv({ FACTORY_FAST_BOOT: 'no' }, paths)).toThrow(/FACTORY_FAST_BOOT must be 0 \(boot cold\) or 1, not "no"/);
  });
});
