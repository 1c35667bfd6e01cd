// The user's knobs for the VM layer, read from the environment by the
// composition root (app.ts, the image CLI) and handed to the QEMU driver, which
// itself reads no environment: FACTORY_FAST_BOOT=0 boots every sandbox cold,
// FACTORY_ACCEL=tcg|kvm|hvf skips the accelerator probe.
import type { AccelName, ForcedAccel } from './accel-probe.js';

export interface VmSettings {
  /** Where fast-boot snapshots live, or false to boot cold. */
  snapshotsDir: string | false;
  forceAccel?: ForcedAccel;
}

const ACCELS: readonly AccelName[] = ['tcg', 'kvm', 'hvf'];

/** Rejects a value it does not know, naming the variable, rather than ignoring it. */
export function vmSettingsFromEnv(env: NodeJS.ProcessEnv, paths: { snapshots: string }): VmSettings {
  const fast = env.FACTORY_FAST_BOOT;
  if (fast !== undefined && fast !== '' && fast !== '0' && fast !== '1') {
    throw new Error(`FACTORY_FAST_BOOT must be 0 (boot cold) or 1, not ${JSON.stringify(fast)}`);
  }
  const accel = env.FACTORY_ACCEL;
  if (accel !== undefined && accel !== '' && !ACCELS.includes(accel as AccelName)) {
    throw new Error(`FACTORY_ACCEL must be one of ${ACCELS.join(', ')}, not ${JSON.stringify(accel)}`);
  }
  return {
    snapshotsDir: fast === '0' ? false : paths.snapshots,
    ...(accel ? { forceAccel: { accel: accel as AccelName, reason: `FACTORY_ACCEL=${accel}` } } : {}),
  };
}
