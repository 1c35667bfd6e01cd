// A repository's cached environment cannot be poisoned from another branch,
// through the whole app with real sandboxes (the real base image under QEMU, the
// real setup script and seeding in the guest). A user first runs a task on an
// untrusted branch whose setup script plants a post-checkout hook in the
// repository's .git, a line in ~/.bashrc, and processes (as the agent user and
// as root) that would go on running. A task on main, whose setup commands read
// the same as text, runs its own setup on the bare image: none of that is
// there. A second task on the untrusted branch (the same files) boots on that
// branch's layer: its install folder is carried over, the planted hook never
// runs (the clone is fresh), and nothing setup started is still running. Nothing
// here needs the network.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Task } from '../../common/domain.js';
import type { FactoryApp } from '../../main/app.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { waitForTask } from '../support/wait-for-task.js';

let env: TestApp | undefined;
let app: FactoryApp;
let repo: FixtureRepo | undefined;
let output: Map<string, string>;

// What a task's test stage sees in its sandbox, one `probe:<name>=<value>` line each.
const PROBE = [
  'echo "probe:bashrc=$(grep -c BASHRC-MARK ~/.bashrc || true)"',
  'echo "probe:hook=$(cat ~/hook-ran 2>/dev/null || echo none)"',
  // The pattern's brackets keep this shell's own command line from matching.
  'echo "probe:leftovers=$(for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f 2>/dev/null; echo; done | grep -c "sleep 4[23]4[23]" || true)"',
  'echo "probe:installed=$(cat node_modules/dep/from-setup 2>/dev/null || echo none)"',
  'echo "probe:hooks=$(ls .git/hooks 2>/dev/null | tr "\\n" " ")"',
  // Which process it was, when one is left: pid, parent, owner, command line.
  'for f in /proc/[0-9]*; do c=$(tr "\\0" " " < $f/cmdline 2>/dev/null); case "$c" in *"sleep 4"[23]4*) echo "left: ${f#/proc/} $(cut -d" " -f4 $f/stat) $(stat -c %U $f) $c";; esac; done',
].join('; ');

const UNTRUSTED_SETUP = [
  'mkdir -p node_modules/dep && echo untrusted > node_modules/dep/from-setup',
  'mkdir -p .git/hooks',
  'printf \'#!/bin/sh\\necho ran > "$HOME/hook-ran"\\n\' > .git/hooks/post-checkout',
  'chmod +x .git/hooks/post-checkout',
  'echo "echo BASHRC-MARK" >> ~/.bashrc',
  'setsid nohup sleep 4242 < /dev/null > /dev/null 2>&1 &',
  '',
].join('\n');

beforeAll(async () => {
  await testImage();
  env = await startTestApp('factory-layer-trust-', { settings: { maxParallelTasks: 1 } });
  ({ app, output } = env);
}, 10 * 60_000);

afterAll(async () => {
  await env?.dispose();
  repo?.cleanup();
});

async function runTask(title: string, baseRef: string): Promise<{ task: Task; probe: Record<string, string> }> {
  const created = await app.api['tasks.create']({ repoPath: repo!.dir, title, agent: 'command', baseRef });
  const task = await waitForTask(app, created.id, (t) => ['review', 'failed', 'cancelled', 'interrupted'].includes(t.phase), 15 * 60_000);
  expect(task.phase, JSON.stringify(task.error)).toBe('review');
  const log = output.get(task.stages.find((s) => s.name === 'test')!.sessionId!) ?? '';
  const probe = Object.fromEntries([...log.matchAll(/^probe:(\w+)=(.*?)\r?$/gm)].map((m) => [m[1]!, m[2]!.trim()]));
  expect(Object.keys(probe).sort(), log).toEqual(['bashrc', 'hook', 'hooks', 'installed', 'leftovers']);
  console.log(`${title}: ${log.split('\n').filter((l) => /^(probe|left):/.test(l)).join(' | ')}`);
  await app.api['tasks.destroy']({ taskId: task.id });
  return { task, probe };
}

describe('a cached environment and another branch', () => {
  it('keeps what an untrusted branch set up out of tasks on main, and out of later tasks on that branch', async () => {
    repo = await makeRepo({
      files: {
        'README.md': '# layer trust\n',
        '.factory/pipeline.json': JSON.stringify({
          environment: { rootSetup: 'bash scripts/root-setup.sh', setup: 'bash scripts/setup.sh' },
          stages: { test: { command: PROBE } },
        }),
        'scripts/setup.sh': 'mkdir -p node_modules/dep && echo main > node_modules/dep/from-setup\n',
        'scripts/root-setup.sh': 'true\n',
      },
    });
    repo.git('checkout', '-q', '-b', 'untrusted');
    repo.write('scripts/setup.sh', UNTRUSTED_SETUP);
    repo.write('scripts/root-setup.sh', 'setsid nohup sleep 4343 < /dev/null > /dev/null 2>&1 &\n');
    repo.commit('A setup that leaves things behind');
    repo.git('checkout', '-q', 'main');

    const untrusted = await runTask('Set up the untrusted branch', 'untrusted');
    expect(untrusted.task.setup).toMatchObject({ status: 'passed', layer: { reused: false } });
    // What setup started is ended before its disk and memory are kept, in this task too.
    expect(untrusted.probe).toMatchObject({ bashrc: '1', installed: 'untrusted', leftovers: '0' });
    const layerId = untrusted.task.setup!.layer!.id;
    const layers = await app.api['layers.list']({});
    const made = layers.find((l) => l.id === layerId);
    expect(made?.made).toEqual({ commit: untrusted.task.baseCommit, tree: repo.git('rev-parse', 'untrusted^{tree}').trim() });

    // main: the same setup commands as text, other files: its own setup on the bare image.
    const main = await runTask('Work on main', 'main');
    expect(main.task.setup).toMatchObject({ status: 'passed', layer: { reused: false } });
    expect(main.task.setup!.layer!.id).not.toBe(layerId);
    expect(main.probe).toMatchObject({ bashrc: '0', hook: 'none', installed: 'main', leftovers: '0' });

    // The untrusted branch again (the same tree): its layer, but never its .git nor what setup left running.
    const again = await runTask('The untrusted branch again', 'untrusted');
    expect(again.task.setup).toMatchObject({ status: 'skipped', layer: { id: layerId, reused: true } });
    expect(again.probe).toMatchObject({ hook: 'none', hooks: '', installed: 'untrusted', leftovers: '0' });
  }, 45 * 60_000);
});
