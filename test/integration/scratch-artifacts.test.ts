// The plan and review files of a real run: kept as the task's artifacts and out
// of the returned branch, unless the repository's pipeline.json sets
// commitScratchFiles, when they are in the branch. Real base image, QEMU, SSH,
// stage runner and pull-back. The agent is a small program run in the sandbox
// that does what the stage prompt says: it writes the file the prompt names
// (with an approving verdict) and appends a line to a file of the repository.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import { createFactoryApp, type FactoryApp } from '../../main/app.js';
import { AgentStageExecutor } from '../../main/pipeline/agents/agent-executor.js';
import { CustomCommandAdapter } from '../../main/pipeline/agents/custom-command.js';
import { appPaths } from '../../main/state/paths.js';
import { makeRepo, tempDir, type FixtureRepo } from '../support/repo.js';
import { testImage } from '../support/image.js';
import { waitForTask } from '../support/wait-for-task.js';

const AGENT = [
  'p=$(cat)',
  // The plan and review prompts say "to the file <path> (...)"; the other stages name no file to write.
  `f=$(printf '%s\\n' "$p" | grep -o 'to the file [^ ]*' | head -n1 | cut -d' ' -f4)`,
  'if [ -n "$f" ]; then printf "# Scratch plan\\n\\nVerdict: approve\\n" > "$f"; echo "wrote $f"; fi',
  'echo ran >> agent-runs.txt',
  'echo done',
].join('\n');

const follower = new AgentStageExecutor({
  adapter: new CustomCommandAdapter({ argv: ['bash', '-c', AGENT], id: 'prompt-follower', displayName: 'Prompt follower' }),
  guestEnv: () => ({}),
});

let dataDir: string;
let app: FactoryApp | undefined;
const repos: FixtureRepo[] = [];

beforeAll(async () => {
  await testImage();
  dataDir = tempDir('factory-data-');
  app = await createFactoryApp({ host: 'web', paths: appPaths({ ...process.env, FACTORY_DATA_DIR: dataDir }), executors: [follower] });
});

afterAll(async () => {
  await app?.dispose();
  for (const r of repos) r.cleanup();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

async function run(pipeline: object): Promise<{ taskId: string; files: string[] }> {
  const repo = await makeRepo({ files: { 'README.md': '# Fixture\n', '.factory/pipeline.json': JSON.stringify(pipeline) } });
  repos.push(repo);
  const a = app!;
  const created = await a.api['tasks.create']({ repoPath: repo.dir, title: 'Plan and review a small change', agent: 'prompt-follower' });
  const t = await waitForTask(a, created.id, (x) => ['review', 'failed', 'cancelled'].includes(x.phase), 15 * 60_000);
  expect(t.phase, JSON.stringify(t.error ?? t.stages)).toBe('review');
  expect(t.stages.find((s) => s.name === 'plan')?.summary).toBe('Scratch plan');
  expect(t.stages.find((s) => s.name === 'review')?.status).toBe('passed');
  const review = await a.api['tasks.review']({ taskId: created.id });
  return { taskId: created.id, files: review.files.map((f) => f.path).sort() };
}

describe('scratch files of a real run', () => {
  it('are the task\'s artifacts, with their content, and not in the returned branch', async () => {
    const { taskId, files } = await run({});
    expect(files).toEqual(['agent-runs.txt']);
    const task = await app!.api['tasks.get']({ taskId });
    expect(task.artifacts?.map((x) => x.name)).toEqual(['PLAN.md', 'REVIEW.md']);
    for (const name of ['PLAN.md', 'REVIEW.md']) {
      expect((await app!.api['tasks.artifact']({ taskId, name })).text).toBe('# Scratch plan\n\nVerdict: approve\n');
    }
  }, 20 * 60_000);

  it('are in the returned branch when the repository sets commitScratchFiles', async () => {
    const { taskId, files } = await run({ commitScratchFiles: true });
    expect(files).toEqual(['PLAN.md', 'REVIEW.md', 'agent-runs.txt']);
    const task = await app!.api['tasks.get']({ taskId });
    expect(task.artifacts ?? []).toEqual([]);
  }, 20 * 60_000);
});
