// The short soak (issue 30) inside `npm test`: a few tasks over four repositories
// with the parallel setting at 3, a quick sandbox, a hooks-style session, approvals and rejections,
// and a few faults (QEMU killed mid-stage, the app SIGKILLed mid-stage and
// restarted, two CLI clients racing approve and destroy, the data folder's disk
// full) — then every invariant of the soak must hold. A new seed each run,
// printed, so a failure is replayed with `npm run soak -- --profile short --seed N`.
// The long soak runs with its own command, `npm run soak`.
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { requireSecretService } from '../support/keyring.js';
import { testImage } from '../support/image.js';
import { ROOT } from '../support/cli.js';
import { summaryText, writeReport } from '../soak/report.js';
import { PROFILES, runSoak } from '../soak/soak-run.js';

describe('the short soak', () => {
  it('keeps every invariant through its faults', async () => {
    requireSecretService();
    await testImage();
    const seed = Number(process.env.FACTORY_SOAK_SEED ?? randomInt(0, 2 ** 31));
    console.log(`short soak: seed ${seed} (replay: npm run soak -- --profile short --seed ${seed})`);
    const report = await runSoak({ ...PROFILES.short, profile: 'short', seed, log: (line) => console.log(line) });
    writeReport(report, path.join(ROOT, 'test-results', 'soak', `short-seed-${seed}`));
    const summary = summaryText(report);
    expect(report.invariantsBroken, summary).toEqual([]);
    expect(report.leftovers, summary).toEqual([]);
    expect(report.leftoverProcesses, summary).toEqual([]);
    expect(report.credentialHits, summary).toEqual([]);
    // The run did what it says: tasks ended, and faults were injected.
    expect(Object.values(report.tasksByOutcome).reduce((a, b) => a + b, 0), summary).toBeGreaterThanOrEqual(PROFILES.short.tasks);
    expect(Object.values(report.faultsInjected).reduce((a, b) => a + b, 0), summary).toBeGreaterThanOrEqual(3);
    expect(report.invariantsChecked).toBeGreaterThan(30);
  });
});
