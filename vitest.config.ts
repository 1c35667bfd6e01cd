import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// Tests mirror the environments (DESIGN.md, "Testing"): node for common/ and main/, jsdom
// for renderer components, real QEMU / keyring / git for integration, Chromium
// for end to end. VM integration and e2e files run at most two at a time, on a
// 2-core machine. Their polls wait up to 15 s: under that load a browser can
// take more than the default second to paint what already arrived. The warm
// pool is off there (an app's waiting VM would count among a test's QEMU
// processes and take a core); test/integration/warm-pool.test.ts turns it on.
//
// Four groups, one after the other (sequence.groupOrder): first the unit and
// renderer tests, with the one integration file that mostly waits (a sandbox kept
// for a minute, idle) and the integration files that boot no VM, four files at a
// time (the waiting file holds one worker, and three keep both cores busy where two
// left a quarter idle while a file waited: 107-120 s, was 129-130 s with three, and
// 115 s with five, 2026-12-07); then the VM integration files two at
// a time; then e2e two at a time (most drive a scripted app that plays its pipeline
// on timers; four at a time was slower, 331 s vs 294 s); then, one at a time, the
// files that time themselves against the clock (a VM's boot, a stage, a browser's
// frames), so no second file measures the machine instead of the product. The VM
// files are CPU-bound under emulation (two at a time kept both cores 95–100 % busy
// and took 1437 s where one at a time took 1712 s, 2026-12-03): pairing them gains
// what one file leaves idle, no more.
// Unit and renderer files share their worker's modules (isolate: false): loading them
// anew for each of 200 files cost more than the tests (renderer alone 67 s → 18 s);
// each renderer file starts with empty storage (test/renderer/support/jsdom-setup.ts).
// One constant: vitest refuses projects of one group with different maxWorkers.
const GROUP0 = { maxWorkers: 4, sequence: { groupOrder: 0 } } as const;
const VM_TESTS = { environment: 'node', testTimeout: 600_000, hookTimeout: 600_000, fileParallelism: false, expect: { poll: { timeout: 15_000 } }, env: { FACTORY_WARM_POOL: '0' } } as const;
const MOSTLY_WAITING = ['test/integration/sandbox-kept.test.ts'];
// VM files that measure time against a bound (a stage's duration, a boot, a terminal's pace,
// event-loop delay): a second VM test beside them would measure the machine, not the product.
// Not cli-e2e.test.ts: its one bound (Ctrl-C answered within 15 s) holds beside another VM file,
// and alone it held the machine half idle for 35 s.
const TIMED = [
  'test/integration/terminal-log-disk.test.ts',
  'test/integration/terminal-sandbox.test.ts',
  'test/integration/warm-pool.test.ts',
  'test/e2e/board-ten-sandboxes.test.ts',
  'test/e2e/review-huge.test.ts',
  'test/e2e/terminal-flood.test.ts',
];
// The longest VM and e2e files start first, so two at a time does not end with one of them alone.
const LONGEST = [
  'real-corpus.test.ts',
  'real-projects.test.ts',
  'fanout-ways.test.ts',
  'hooks-claude-code.test.ts',
  'node-runtime-setup.test.ts',
  'claude-code-sandbox.test.ts',
  'remote-task.test.ts',
  'real-project.test.ts',
  'a11y-axe.test.ts',
];
// Integration files that boot no VM (keychain, proxy, quarantine, an agent CLI
// as a host process, the CLI's own app with the warm pool off): they run beside
// the unit tests instead of alone. Not terminal-log-disk.test.ts: it measures
// event-loop delay and wants the machine.
const NO_VM = [
  'test/integration/cli-idle-exit.test.ts',
  'test/integration/cli-socket.test.ts',
  'test/integration/credentials-destination.test.ts',
  'test/integration/credentials-keychain.test.ts',
  'test/integration/pullback-secrets.test.ts',
  'test/integration/agents/claude-code-host.test.ts',
  'test/integration/agents/codex-host.test.ts',
];

/**
 * The waiting file starts first, so its minute overlaps the unit tests instead of running alone
 * after them; among the VM files, the longest start first.
 */
class WaitingFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const waiting = (f: TestSpecification) => f.project.name === 'integration-waiting';
    const rank = (f: TestSpecification) => {
      const i = LONGEST.findIndex((name) => f.moduleId.endsWith(`/${name}`));
      return i < 0 ? LONGEST.length : i;
    };
    const rest = sorted.filter((f) => !waiting(f));
    return [...sorted.filter(waiting), ...rest.map((f, i) => ({ f, i })).sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i).map(({ f }) => f)];
  }
}

export default defineConfig({
  test: {
    maxWorkers: 2,
    sequence: { sequencer: WaitingFirst },
    projects: [
      // A poll waits for an event (a phase, a file, a process); under the shared machine's load one second is not enough for one.
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false, environment: 'node', testTimeout: 30_000, expect: { poll: { timeout: 10_000 } }, ...GROUP0 } },
      {
        test: {
          name: 'renderer',
          include: ['test/renderer/**/*.test.{ts,tsx}'],
          environment: 'jsdom',
          isolate: false,
          testTimeout: 30_000,
          setupFiles: ['test/renderer/support/jsdom-setup.ts'],
          ...GROUP0,
        },
        esbuild: { jsx: 'automatic' },
      },
      // Not one file at a time: the same pool as the unit tests, so it runs beside them.
      { test: { name: 'integration-waiting', include: MOSTLY_WAITING, ...VM_TESTS, fileParallelism: true, ...GROUP0 } },
      { test: { name: 'integration-no-vm', include: NO_VM, ...VM_TESTS, fileParallelism: true, ...GROUP0 } },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: [...MOSTLY_WAITING, ...NO_VM, ...TIMED],
          // The stand-in sandbox host's images folder, shared by the remote files of one run.
          globalSetup: ['test/support/rig-images.global-setup.ts'],
          ...VM_TESTS,
          fileParallelism: true,
          sequence: { groupOrder: 1 },
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          exclude: TIMED,
          globalSetup: ['test/e2e/support/global-setup.ts'],
          ...VM_TESTS,
          testTimeout: 900_000,
          hookTimeout: 900_000,
          fileParallelism: true,
          sequence: { groupOrder: 2 },
        },
      },
      { test: { name: 'timed', include: TIMED, globalSetup: ['test/e2e/support/global-setup.ts'], ...VM_TESTS, testTimeout: 900_000, hookTimeout: 900_000, sequence: { groupOrder: 3 } } },
    ],
  },
});
