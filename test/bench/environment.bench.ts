// Environment benchmark, run with:
//   bash test/support/with-keyring.sh npx tsx test/bench/environment.bench.ts
// One app, one Node fixture (a real dependency, a node --test suite). Measures,
// in the same run:
//  (a) Start → test stage finished for the first task on the repository (setup
//      runs: Node from the registry, npm ci through the proxy) and for the second
//      task on the unchanged repository (boots on the cached layer, setup
//      skipped); prints both and their ratio (goal: second ≤ 0.25 × first);
//  (b) the layer's size on disk;
//  (c) the project install step through the proxy (npm ci in the sandbox, from its
//      terminal's timing) and the whole setup (Node and npm ci) against `npm ci` of
//      the same lockfile on the host with an empty npm cache, as ratios.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Task } from '../../common/domain.js';
import { createFactoryApp } from '../../main/app.js';
import { appPaths } from '../../main/state/paths.js';
import { egressRulesForThisNetwork } from '../support/egress-network.js';
import { testImage } from '../support/image.js';
import { makeNodeProject } from '../support/project-fixtures.js';
import { tempDir } from '../support/repo.js';
import { waitForTask } from '../support/wait-for-task.js';
import { collectTerminalOutput, removeLayersOf } from '../support/test-app.js';

const fmt = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const ended = (t: Task) => ['review', 'failed', 'cancelled', 'interrupted'].includes(t.phase);

async function main() {
  const image = await testImage();
  const dataDir = tempDir('fenv-bench-');
  const app = await createFactoryApp({
    host: 'web',
    paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }),
    settings: { egressRules: await egressRulesForThisNetwork() },
  });
  const output = collectTerminalOutput(app);
  const repo = await makeNodeProject();
  try {
    console.log(`image ${image.version}, ${os.cpus().length} host cores, load ${os.loadavg()[0]!.toFixed(2)}`);
    const startToTest = async (title: string): Promise<{ ms: number; task: Task }> => {
      const started = Date.now();
      const created = await app.api['tasks.create']({ repoPath: repo.dir, title, agent: 'command' });
      const task = await waitForTask(app, created.id, ended, 20 * 60_000);
      const test = task.stages.find((s) => s.name === 'test')!;
      if (task.phase !== 'review' || !test.endedAt) throw new Error(`task ${task.id} ended ${task.phase}: ${JSON.stringify(task.error)}`);
      return { ms: Date.parse(test.endedAt) - started, task };
    };
    const first = await startToTest('first task');
    await app.api['tasks.destroy']({ taskId: first.task.id });
    const second = await startToTest('second task');
    await app.api['tasks.destroy']({ taskId: second.task.id });
    console.log(`(a) Start → test finished: first ${fmt(first.ms)} (setup ${fmt(first.task.setup?.durationMs ?? 0)}), second ${fmt(second.ms)} (setup ${second.task.setup?.status}); ratio second/first ${(second.ms / first.ms).toFixed(3)} (goal ≤ 0.25)`);
    // The second sandbox resumes the layer's saved memory when it can (a cold boot on the layer takes ~2-3× as long).
    console.log(`    boot to SSH: first ${fmt(first.task.sandbox?.bootMs ?? NaN)}, second (on the layer) ${fmt(second.task.sandbox?.bootMs ?? NaN)}`);

    const layers = await app.api['layers.list']({});
    const layer = layers.find((l) => l.id === first.task.setup?.layer?.id);
    if (!layer || second.task.setup?.status !== 'skipped') {
      // Why the second task did not get the first one's layer: the setup's note and the app log's word on layers.
      console.log(`    no layer reused: the first task's setup says ${JSON.stringify(first.task.setup?.summary)}`);
      const log = path.join(dataDir, 'logs', 'app.log');
      if (fs.existsSync(log)) for (const line of fs.readFileSync(log, 'utf8').split('\n').filter((l) => /environment|layer|memory/i.test(l))) console.log(`    log: ${line.slice(0, 400)}`);
    }
    console.log(`(b) layer ${layer?.id}: ${((layer?.sizeBytes ?? 0) / 1024 ** 2).toFixed(1)} MiB on disk`);

    // The sandbox's npm ci, timed by the setup script's own step lines.
    const setupLog = output.get(first.task.setup?.sessionId ?? '') ?? '';
    const npmCi = /npm ci[^\n]*\n[\s\S]*?added \d+ packages?[^\n]*in ([\d.]+)(m?s)/.exec(setupLog);
    const guestMs = npmCi ? Number(npmCi[1]) * (npmCi[2] === 's' ? 1000 : 1) : NaN;
    const hostDir = tempDir('fenv-host-');
    fs.cpSync(path.join(repo.dir, 'package.json'), path.join(hostDir, 'package.json'));
    fs.cpSync(path.join(repo.dir, 'package-lock.json'), path.join(hostDir, 'package-lock.json'));
    const cache = tempDir('fenv-npm-cache-');
    const t0 = Date.now();
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--cache', cache], { cwd: hostDir, stdio: 'pipe' });
    const hostMs = Date.now() - t0;
    fs.rmSync(hostDir, { recursive: true, force: true });
    fs.rmSync(cache, { recursive: true, force: true });
    console.log(`(c) npm ci: sandbox through the proxy ${fmt(guestMs)} (npm's own figure), host direct ${fmt(hostMs)}; ratio ${(guestMs / hostMs).toFixed(2)}`);
    // The whole setup (proxy settings, Node from the registry, npm ci), all through the proxy, against the same host npm ci.
    const setupMs = first.task.setup?.durationMs ?? NaN;
    console.log(`    whole setup through the proxy ${fmt(setupMs)} vs host npm ci ${fmt(hostMs)}; ratio ${(setupMs / hostMs).toFixed(2)}`);
  } finally {
    await removeLayersOf(app);
    await app.dispose();
    repo.cleanup();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
