// `npm run soak`: the soak with its own command (issue 30), seeded and replayable.
//   npm run soak -- [--profile short|medium|full|model] [--seed N] [--tasks N] [--out DIR] [--no-model-faults]
// The seed is printed first; the same seed replays the same choices. The report
// (report.json, summary.md, memory.svg) goes to test-results/soak/seed-<N>/ unless
// --out says otherwise. Exit status 1 when an invariant broke.
import { randomInt } from 'node:crypto';
import path from 'node:path';
import { testImage } from '../support/image.js';
import { ROOT } from '../support/cli.js';
import { writeReport, summaryText } from './report.js';
import { MODEL_FAULT_KINDS } from './model-faults.js';
import { PROFILES, runSoak } from './soak-run.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function intArg(name: string, fallback: number): number {
  const raw = arg(name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name}: not a whole number: ${raw}`);
  return n;
}

async function main(): Promise<void> {
  const profileName = (arg('profile') ?? 'medium') as keyof typeof PROFILES;
  const profile = PROFILES[profileName];
  if (!profile) throw new Error(`--profile: one of ${Object.keys(PROFILES).join(', ')}, not ${profileName}`);
  const seed = intArg('seed', randomInt(0, 2 ** 31));
  console.log(`soak: seed ${seed} (replay with --seed ${seed}), profile ${profileName}`);
  await testImage();
  // --no-model-faults: the task and app faults alone (the model faults' Claude Code tasks take most of a full run).
  const faults = process.argv.includes('--no-model-faults') ? profile.faults.filter((f) => !(MODEL_FAULT_KINDS as readonly string[]).includes(f)) : profile.faults;
  const report = await runSoak({ ...profile, faults, profile: profileName, seed, tasks: intArg('tasks', profile.tasks) });
  const out = writeReport(report, arg('out') ?? path.join(ROOT, 'test-results', 'soak', `seed-${seed}`));
  console.log(`\n${summaryText(report)}`);
  console.log(`report: ${out.json}\nsummary: ${out.summary}\nmemory plot: ${out.svg}`);
  process.exit(report.invariantsBroken.length ? 1 : 0);
}

main().catch((err: Error) => {
  console.error(`soak: ${err.stack ?? err.message}`);
  process.exit(2);
});
