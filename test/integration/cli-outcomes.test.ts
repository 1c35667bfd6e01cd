// The factory CLI's exit statuses and the commands the main CLI test does not
// drive, as a script uses them: the real app (started by the CLI), real
// sandboxes under QEMU, a fixture repository with two commits. `run --wait
// --base` on the older commit, whose tests fail, exits 1 with the failed task;
// `leakcheck` on its sandbox says clean (exit 0), then, after the sandbox was
// given the credential it could use, names it (exit 1); `reject` discards the
// work of a task in review: no branch appears in the repository. A repository
// whose environment asks for destinations not allowed always for it starts
// nothing until `run` names each with --allow-egress, for that task only.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeakReport } from '../../common/credentials.js';
import { Task } from '../../common/domain.js';
import { FactoryClient } from '../../main/cli/client.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { runCli, stopApp } from '../support/cli.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';

const SECRET = 'sk-ant-api03-cliOutcomes-Hq3vTn8Lw2';
const pipeline = (testCommand: string) =>
  JSON.stringify({ stages: { plan: { command: 'echo PLAN' }, build: { command: 'echo "more" >> README.md' }, test: { command: testCommand } } });

let dataDir: string;
let repo: FixtureRepo;
let oldCommit: string;
let client: FactoryClient;
let credentialId: string;
let failedId: string;

beforeAll(async () => {
  await testImage();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fcli-'));
  // v1's tests fail; the commit after it fixes them.
  repo = await makeRepo({ files: { 'README.md': '# Fixture\n', '.factory/pipeline.json': pipeline('echo "tests: 0 passed, 1 failed"; exit 1') } });
  oldCommit = repo.head();
  repo.git('tag', 'v1');
  repo.write('.factory/pipeline.json', pipeline('echo "tests: 1 passed"'));
  repo.commit('fix the tests');
  const ls = await runCli(dataDir, ['ls']);
  expect(ls.code, ls.stderr).toBe(0);
  client = await FactoryClient.connect(path.join(dataDir, 'factory.sock'));
  // A credential every sandbox could use: what the leak check looks for.
  credentialId = (await client.call('credentials.set', { kind: 'anthropic', label: 'Anthropic', value: SECRET, target: { upstream: 'https://api.anthropic.com' } })).id;
}, 10 * 60_000);

afterAll(async () => {
  client?.close();
  if (dataDir) {
    await stopApp(dataDir);
    for (const p of qemuProcessesUnder(dataDir)) process.kill(p.pid, 'SIGKILL'); // never leave one behind
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  repo?.cleanup();
});

function cli(args: string[], timeoutMs = 120_000) {
  return runCli(dataDir, args, { timeoutMs });
}

describe('factory CLI outcomes on a real sandbox', () => {
  it('run --wait --base on a commit whose tests fail exits 1 with the failed task, which ran that commit', async () => {
    const r = await cli(['run', repo.dir, 'check the old release', '--agent', 'command', '--base', 'v1', '--wait', '--json'], 10 * 60_000);
    expect(r.code, r.stderr).toBe(1);
    const task = Task.parse(JSON.parse(r.stdout));
    failedId = task.id;
    expect(task.phase).toBe('failed');
    expect(task.baseCommit).toBe(oldCommit);
    expect(task.stages.find((s) => s.name === 'test')?.status).toBe('failed');
    expect(r.stderr).toMatch(/build\s+passed[\s\S]*test\s+failed/);
  });

  it('leakcheck says clean for a clean sandbox and names the credential once the sandbox holds it', async () => {
    const clean = await cli(['leakcheck', failedId, '--json'], 5 * 60_000);
    expect(clean.code, clean.stderr).toBe(0);
    expect(LeakReport.parse(JSON.parse(clean.stdout)).verdict).toBe('clean');
    const planted = await cli(['exec', failedId, '--', 'sh', '-c', `echo ${SECRET} > notes.txt && sync`]);
    expect(planted.code, planted.stderr).toBe(0);
    const leak = await cli(['leakcheck', failedId], 5 * 60_000);
    expect(leak.code).toBe(1);
    expect(leak.stdout).toContain(`leak check of ${failedId}: leak`);
    expect(leak.stdout).toContain(`found credential ${credentialId}`);
    const d = await cli(['destroy', failedId, '--json']);
    expect(d.code, d.stderr).toBe(0);
    expect(Task.parse(JSON.parse(d.stdout)).sandbox.status).toBe('destroyed');
  });

  it('run starts nothing for a repository asking for more network until each destination is named with --allow-egress', async () => {
    // Only what the user allows is checked here; the proxy letting an allowed rule through is the real-projects test's.
    const asking = await makeRepo({
      files: {
        'README.md': '# Asks for two hosts\n',
        '.factory/pipeline.json': JSON.stringify({
          environment: { egress: [{ host: 'mirror.example.test', port: 8080, scheme: 'http' }, { host: '*.files.example.test' }] },
          stages: { build: { command: 'echo "built" >> README.md' } },
        }),
      },
    });
    const MIRROR = 'http://mirror.example.test:8080';
    // A wildcard is printed quoted, so the suggested flags can be pasted into a shell as they are.
    const FILES = 'https://*.files.example.test:443';
    const FILES_QUOTED = `'${FILES}'`;
    try {
      const before = (await client.call('tasks.list', {})).length;
      const refused = await cli(['run', asking.dir, 'build it', '--agent', 'command', '--wait']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`add --allow-egress ${MIRROR} --allow-egress ${FILES_QUOTED},`);
      // Naming one is not consent to the other; naming one it does not ask for is refused.
      const one = await cli(['run', asking.dir, 'build it', '--agent', 'command', '--allow-egress', MIRROR]);
      expect(one.code).toBe(1);
      expect(one.stderr).toContain(`add --allow-egress ${FILES_QUOTED},`);
      expect(one.stderr).not.toContain(`add --allow-egress ${MIRROR}`);
      const other = await cli(['run', asking.dir, 'build it', '--agent', 'command', '--allow-egress', MIRROR, '--allow-egress', FILES, '--allow-egress', 'https://elsewhere.example.test:443']);
      expect(other.code).toBe(2); // a usage error
      expect(other.stderr).toContain('https://elsewhere.example.test:443: the repository does not ask for it');
      expect((await client.call('tasks.list', {})).length).toBe(before);

      const allowed = await cli(['run', asking.dir, 'build it', '--agent', 'command', '--allow-egress', FILES, '--allow-egress', MIRROR, '--wait', '--json'], 10 * 60_000);
      expect(allowed.code, allowed.stderr).toBe(0);
      expect(allowed.stderr).toContain(`allowing this task to reach: ${MIRROR}, ${FILES}`);
      const task = Task.parse(JSON.parse(allowed.stdout));
      expect(task.phase).toBe('review');
      expect(task.egress?.allowed.map((r) => `${r.scheme}://${r.host}:${r.port}`)).toEqual([MIRROR, FILES]);
      expect((await cli(['reject', task.id])).code).toBe(0);
    } finally {
      asking.cleanup();
    }
  });

  it('reject discards the work of a task in review: no branch in the repository, no sandbox left', async () => {
    const head = repo.head();
    const run = await cli(['run', repo.dir, 'append a line', '--agent', 'command', '--wait'], 10 * 60_000);
    expect(run.code, run.stderr).toBe(0);
    const id = run.stdout.trim();
    const r = await cli(['reject', id, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(Task.parse(JSON.parse(r.stdout)).phase).toBe('rejected');
    expect(repo.git('branch', '--list', 'factory/*').trim()).toBe('');
    expect(repo.head()).toBe(head);
    await expect.poll(() => qemuProcessesUnder(dataDir).length, { timeout: 120_000, interval: 500 }).toBe(0);
    // A decision is made once.
    const again = await cli(['approve', id]);
    expect(again.code).toBe(1);
  });
});
