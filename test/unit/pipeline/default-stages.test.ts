// The stages a repository did not configure, as the command agent runs them:
// what the work tree calls for runs, a stage with nothing to do is skipped with
// its reason, and a repository that needs a runner the sandbox lacks fails.
// The probe runs in a real bash over real ssh2 channels (test/support/local-guest.ts);
// the PATH the "sandbox" gets is a folder holding only the tools a test allows.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StageName, Task } from '../../../common/domain.js';
import { shellQuote } from '../../../common/shell-quote.js';
import { defaultPipelineConfig } from '../../../main/pipeline/config.js';
import { CommandStageExecutor, type GuestRunResult, type StageRunContext } from '../../../main/pipeline/stage-executor.js';
import { localGuest, type LocalGuest } from '../../support/local-guest.js';
import { NO_TEST_COMMAND } from '../../../main/pipeline/default-stages.js';

const BASIC_TOOLS = ['bash', 'env', 'head', 'base64', 'cat', 'rm', 'sh', 'node', 'dirname', 'basename', 'sed', 'uname', 'grep'];

let dir: string;
let repo: string;
let guest: LocalGuest;
beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'default-stages-'));
  repo = path.join(dir, 'repo');
  fs.mkdirSync(repo);
  guest = await localGuest({ cwd: repo });
});
afterEach(async () => {
  await guest.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A bin folder with only these programs, linked from this machine. */
function binWith(tools: string[]): string {
  const bin = fs.mkdtempSync(path.join(dir, 'bin-'));
  for (const t of tools) {
    const found = ['/usr/local/bin', '/usr/bin', '/bin'].map((d) => path.join(d, t)).find((p) => fs.existsSync(p));
    if (found) fs.symlinkSync(found, path.join(bin, t));
  }
  return bin;
}

const TASK: Task = {
  id: 'task-defaults', title: 'x', repoPath: '/nonexistent', baseRef: 'main', baseCommit: 'a'.repeat(40), branch: 'factory/task-defaults',
  createdAt: new Date().toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
};

/**
 * Runs one stage. The stage runner's runInSandbox is replaced by a real bash in
 * the repository with the same PATH (the runner's terminals are tested elsewhere).
 */
async function runStage(stage: StageName, bin: string, configure?: (c: ReturnType<typeof defaultPipelineConfig>) => void) {
  const config = defaultPipelineConfig();
  configure?.(config);
  const ran: string[] = [];
  const executor = new CommandStageExecutor({
    probe: { repoDir: repo, envFile: path.join(dir, 'no-env.sh'), asAgent: (s) => `env -i PATH=${shellQuote(bin)} bash -c ${shellQuote(s)}` },
  });
  const runInSandbox = async (script: string): Promise<GuestRunResult> => {
    ran.push(script);
    const child = spawn('bash', ['-c', script], { cwd: repo, env: { PATH: bin, HOME: dir } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    return { code, sessionId: 's1', timedOut: false, cancelled: false, lost: false, durationMs: 1, tail: (n) => out.slice(-n) };
  };
  const ctx: StageRunContext = {
    task: TASK, stage, config, stageConfig: config.stages[stage], signal: new AbortController().signal, ssh: guest.ssh, runInSandbox,
  };
  return { outcome: await executor.runStage(ctx), ran };
}

describe('default stages say whether they did something', () => {
  it('plan, review and document without an agent are skipped with the reason, and nothing runs in the sandbox', async () => {
    const bin = binWith(BASIC_TOOLS);
    for (const stage of ['plan', 'review', 'document'] as const) {
      const { outcome, ran } = await runStage(stage, bin);
      expect(outcome).toMatchObject({ status: 'skipped', summary: `no ${stage} command configured and no agent chosen` });
      expect(ran).toEqual([]);
    }
    expect(guest.commands).toEqual([]);
  });

  it('a repository with nothing to build or test: build and test are skipped, each with its reason', async () => {
    fs.writeFileSync(path.join(repo, 'README.md'), '# nothing here\n');
    // A package.json whose only test script is the npm init placeholder is not a test suite.
    fs.writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ scripts: { test: 'echo "Error: no test specified" && exit 1' } }));
    const bin = binWith([...BASIC_TOOLS, 'npm', 'make']);
    expect((await runStage('build', bin)).outcome).toMatchObject({ status: 'skipped', summary: 'no build step found' });
    const test = await runStage('test', bin);
    expect(test.outcome).toMatchObject({ status: 'skipped', summary: NO_TEST_COMMAND });
    expect(NO_TEST_COMMAND).toContain('"stages": { "test": { "command": ');
    expect(test.ran).toEqual([]);
  });

  it('a package.json with a test script in a sandbox without npm fails the test stage with that reason', async () => {
    fs.writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ scripts: { test: 'node --test' } }));
    const { outcome, ran } = await runStage('test', binWith(BASIC_TOOLS));
    expect(outcome).toMatchObject({ status: 'failed', summary: 'package.json has a test script but npm is not installed in the sandbox' });
    expect(ran).toEqual([]);
  });

  it('a Makefile with a default target in a sandbox without make fails the build stage with that reason', async () => {
    fs.writeFileSync(path.join(repo, 'Makefile'), 'CC ?= gcc\n.PHONY: all\nall: hello\n\nhello: hello.c\n\t$(CC) -o $@ $<\n');
    const { outcome } = await runStage('build', binWith(BASIC_TOOLS));
    expect(outcome).toMatchObject({ status: 'failed', summary: 'Makefile has a default target (all) but make is not installed in the sandbox' });
  });

  it('a build script runs as `npm run build` when npm is there', async () => {
    fs.writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ name: 'fixture', version: '1.0.0', scripts: { build: 'echo built > out.txt' } }));
    const { outcome, ran } = await runStage('build', binWith([...BASIC_TOOLS, 'npm']));
    expect(ran).toEqual(['npm run build']);
    expect(outcome.status).toBe('passed');
    expect(fs.readFileSync(path.join(repo, 'out.txt'), 'utf8')).toBe('built\n');
  });
});

const SUITE = `
const test = require('node:test');
const assert = require('node:assert');
test('adds numbers', () => assert.strictEqual(1 + 1, 3));
test('subtracts', () => assert.strictEqual(2 - 1, 1));
`;

describe('the test stage reports what the runner counted', () => {
  it('a real npm test over node --test: counts and the failing test by name, failed by its exit status', async () => {
    fs.writeFileSync(path.join(repo, 'package.json'), JSON.stringify({ name: 'fixture', version: '1.0.0', scripts: { test: 'node --test' } }));
    fs.writeFileSync(path.join(repo, 'math.test.js'), SUITE);
    const { outcome, ran } = await runStage('test', binWith([...BASIC_TOOLS, 'npm']));
    expect(ran).toEqual(['npm test']);
    expect(outcome).toMatchObject({ status: 'failed', exitCode: 1, summary: '1 passed, 1 failed: adds numbers' });
  });

  it('a suite that prints "# pass 999" after failing still fails', async () => {
    fs.writeFileSync(path.join(repo, 'math.test.js'), SUITE);
    const { outcome } = await runStage('test', binWith(BASIC_TOOLS), (c) => {
      c.stages.test = { ...c.stages.test, isDefault: false, command: `node --test; rc=$?; printf '# pass 999\\n# fail 0\\nok 1 - all good\\n'; exit $rc` };
    });
    expect(outcome.status).toBe('failed');
    expect(outcome.exitCode).toBe(1);
  });
});
