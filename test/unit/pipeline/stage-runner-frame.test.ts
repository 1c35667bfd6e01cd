// What a stage's terminal says around the guest process: the runner, the real
// terminal service (logs on disk) and real ssh2 channels on 127.0.0.1. The far
// end is an in-process ssh2 server standing in for the sandbox (a VM cannot
// boot in a unit test; test/integration/task-failure.test.ts runs a real one):
// it stores the files the runner uploads and plays each stage script as the
// test says.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import ssh2 from 'ssh2';
import type { ClientChannel, ServerChannel } from 'ssh2';
import type { StageResult, Task } from '../../../common/domain.js';
import { generateEd25519 } from '../../../main/ssh/sandbox-keys.js';
import { sshChannelSource } from '../../../main/terminal/ssh-channel-source.js';
import { TerminalService } from '../../../main/terminal/terminal-service.js';
import { terminalBytesToText } from '../../../main/terminal/flow-control.js';
import { defaultPipelineConfig, type PipelineConfig } from '../../../main/pipeline/config.js';
import { CommandStageExecutor, type GuestSsh } from '../../../main/pipeline/stage-executor.js';
import { PipelineRunner } from '../../../main/pipeline/stage-runner.js';
import { NO_TEST_COMMAND } from '../../../main/pipeline/default-stages.js';
import { planRetry } from '../../../main/tasks/retry-plan.js';

const { Client, Server } = ssh2;
const hostKey = generateEd25519('test-guest').private;

/** How the stand-in guest plays a stage script: output, then an exit status (or nothing: it hangs until killed). */
type Play = (script: string, out: ServerChannel) => void;

let dir: string;
const cleanups: Array<() => void | Promise<void>> = [];
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stage-frame-'));
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  fs.rmSync(dir, { recursive: true, force: true });
});

async function guest(play: Play): Promise<GuestSsh> {
  const files = new Map<string, string>();
  const server = new Server({ hostKeys: [hostKey] }, (client) => {
    client.on('authentication', (ctx) => ctx.accept());
    client.on('error', () => {});
    client.on('ready', () =>
      client.on('session', (accept) => {
        const session = accept();
        session.on('pty', (ok) => ok?.());
        session.on('signal', (ok) => ok?.());
        session.on('exec', (ok, _rej, info) => {
          const ch = ok();
          const upload = /^umask 022 && mkdir -p \S+ && cat > \S+ && mv -f \S+ '([^']+)'$/.exec(info.command);
          if (upload) {
            let body = '';
            ch.on('data', (d: Buffer) => (body += d.toString('utf8')));
            ch.on('end', () => {
              files.set(upload[1]!, body);
              ch.exit(0);
              ch.end();
            });
            return;
          }
          const run = /'bash' '(\/work\/\.factory\/run\/[^']+)'/.exec(info.command);
          if (run) return play(files.get(run[1]!) ?? '', ch);
          // The final commit answers with the head it made.
          if (info.command.includes('FACTORY_HEAD')) ch.write(`FACTORY_HEAD ${'b'.repeat(40)}\n`);
          ch.exit(0); // the kill of the agent's processes, and anything else
          ch.end();
        });
      }),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  const client = await new Promise<InstanceType<typeof Client>>((resolve, reject) => {
    const c = new Client();
    c.on('ready', () => resolve(c)).on('error', reject);
    c.connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, username: 'root', password: 'x' });
  });
  cleanups.push(() => void client.end());
  const exec = (command: string, opts: { pty?: { cols: number; rows: number } } = {}) =>
    new Promise<ClientChannel>((resolve, reject) =>
      client.exec(command, opts.pty ? { pty: { cols: opts.pty.cols, rows: opts.pty.rows, term: 'xterm-256color' } } : {}, (err, ch) =>
        err ? reject(err) : resolve(ch),
      ),
    );
  return {
    exec,
    run: async (command) => {
      const ch = await exec(command);
      let stdout = '';
      ch.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
      ch.stderr.resume();
      return new Promise((resolve) => ch.on('close', () => resolve({ code: 0, stdout, stderr: '' })));
    },
    putFile: async () => {},
    getFile: async () => 0,
  };
}

function setup() {
  const terminals = new TerminalService({ logDir: path.join(dir, 'logs'), emit: () => {}, emitData: () => {}, warn: () => {} });
  cleanups.push(() => terminals.dispose());
  const runner = new PipelineRunner({
    terminals,
    sourceForChannel: sshChannelSource,
    executors: new Map([['command', new CommandStageExecutor()]]),
    log: { debug() {}, info() {}, warn() {}, error() {}, child() { return this; } } as never,
  });
  /** What a viewer opening the finished session sees (its replay), as text. */
  const screen = (sessionId: string) => terminalBytesToText(Buffer.from(terminals.attach(sessionId).scrollback, 'base64'));
  /** The raw bytes of the session's log on disk. */
  const logBytes = async (sessionId: string) => {
    await terminals.logSettled(sessionId);
    const file = fs.readdirSync(path.join(dir, 'logs')).find((f) => f.startsWith(sessionId) && !f.endsWith('.json'));
    return fs.readFileSync(path.join(dir, 'logs', file!), 'latin1');
  };
  return { terminals, runner, screen, logBytes };
}

function config(testCommand: string, timeoutSeconds?: number): PipelineConfig {
  const cfg = defaultPipelineConfig();
  // As .factory/pipeline.json configures it (a stage left to the defaults decides for itself what runs).
  cfg.stages.test = { ...cfg.stages.test, command: testCommand, isDefault: false, ...(timeoutSeconds ? { timeoutSeconds } : {}) };
  return cfg;
}

const TASK: Task = {
  id: 'task-frame-1', title: 'make it green', repoPath: '/nonexistent', baseRef: 'main', baseCommit: 'a'.repeat(40),
  branch: 'factory/task-frame-1', createdAt: new Date().toISOString(), phase: 'running', sandbox: { status: 'running' }, stages: [],
};
const PASSED_BEFORE_TEST: StageResult[] = (['request', 'plan', 'build'] as const).map((name) => ({ name, status: 'passed' as const }));

/** The guest: the test stage prints two lines and exits 3; other stages pass quietly. */
const failingTests: Play = (script, ch) => {
  if (script.includes('npm test')) ch.write('> vitest run\r\n\x1b[31m1 failing\x1b[0m\r\n');
  ch.exit(script.includes('npm test') ? 3 : 0);
  ch.end();
};

describe('stage terminals tell what ran and how it ended', () => {
  it('a failing test stage: "$ npm test" first, the output, "exit status 3" last, in the replay and the log', async () => {
    const { runner, screen, logBytes } = setup();
    const ssh = await guest(failingTests);
    const out = await runner.run({
      task: TASK, config: config('npm test'), ssh, signal: new AbortController().signal, onStages: () => {},
      startAt: 'test', previous: [...PASSED_BEFORE_TEST, { name: 'test', status: 'pending' }],
    });
    expect(out.status).toBe('failed');
    const test = out.stages.find((s) => s.name === 'test')!;
    const lines = screen(test.sessionId!).split('\n').map((l) => l.trim()).filter(Boolean);
    expect(lines).toEqual(['$ npm test', '> vitest run', '1 failing', 'exit status 3']);
    // Written by the host into the session itself, in grey: the log on disk has the same lines.
    const log = await logBytes(test.sessionId!);
    expect(log.startsWith('\x1b[38;5;246m$ npm test\x1b[0m\r\n')).toBe(true);
    expect(log).toMatch(/\x1b\[38;5;246mexit status 3\x1b\[0m\r\n$/);
  });

  it('the card reason is the last output line, the exit status only in its own field, and uncounted tests are said to be', async () => {
    const { runner } = setup();
    const out = await runner.run({
      task: TASK, config: config('npm test'), ssh: await guest(failingTests), signal: new AbortController().signal, onStages: () => {},
      startAt: 'test', previous: [...PASSED_BEFORE_TEST, { name: 'test', status: 'pending' }],
    });
    const test = out.stages.find((s) => s.name === 'test')!;
    expect(test).toMatchObject({ status: 'failed', exitCode: 3, summary: '1 failing (test counts not recognised)', attempt: 1 });
    expect(out.error?.message).toBe('stage test failed with exit status 3: 1 failing (test counts not recognised)');
  });

  it("uvu behind npm test: the card counts uvu's summary and names the test, not npm's spinner frame", async () => {
    const { runner } = setup();
    // The real bytes npm 11 and uvu 0.5.6 printed under a pty, spinner frame last.
    const printed = fs.readFileSync(path.join(import.meta.dirname, '../../fixtures/runner-output/npm-11-uvu-0.5.6-fail.txt'));
    const ssh = await guest((script, ch) => {
      if (script.includes('npm test')) ch.write(printed);
      ch.exit(script.includes('npm test') ? 1 : 0);
      ch.end();
    });
    const out = await runner.run({
      task: TASK, config: config('npm test'), ssh, signal: new AbortController().signal, onStages: () => {},
      startAt: 'test', previous: [...PASSED_BEFORE_TEST, { name: 'test', status: 'pending' }],
    });
    const test = out.stages.find((s) => s.name === 'test')!;
    expect(test).toMatchObject({ status: 'failed', exitCode: 1, summary: '2 passed, 1 failed, 1 skipped: adds strings wrongly' });
  });

  it("a build whose output ends in npm's spinner and a CR-drawn progress line: the card shows the last line of text", async () => {
    const { runner } = setup();
    const cfg = config('true');
    cfg.stages.build = { ...cfg.stages.build, command: 'npm run build', isDefault: false };
    const ssh = await guest((script, ch) => {
      if (script.includes('npm run build')) ch.write('> x@1.0.0 build\r\n> tsc\r\n\r\nbuilding 10%\rbuilding 100%\r\nbuilt in 2s\r\n\u280b\x1b[1G\u2819\x1b[1G');
      ch.exit(0);
      ch.end();
    });
    const out = await runner.run({
      task: TASK, config: cfg, ssh, signal: new AbortController().signal, onStages: () => {},
      startAt: 'build', previous: [...PASSED_BEFORE_TEST.slice(0, 2), { name: 'build', status: 'pending' }],
    });
    expect(out.stages.find((s) => s.name === 'build')).toMatchObject({ status: 'passed', summary: 'built in 2s' });
  });

  it('a passing stage ends with "passed"; a stage past its time limit with "timed out after 1 s"', async () => {
    const { runner, screen } = setup();
    // The request stage passes; the test stage says one line and then hangs until the runner kills it.
    const ssh = await guest((script, ch) => {
      if (script.includes('sleep forever')) return void ch.write('waiting\r\n');
      ch.write('ok\r\n');
      ch.exit(0);
      ch.end();
    });
    const cfg = config('sleep forever', 1);
    cfg.stages.request = { ...cfg.stages.request, command: 'echo ok' };
    const out = await runner.run({ task: TASK, config: cfg, ssh, signal: new AbortController().signal, onStages: () => {} });
    const byName = Object.fromEntries(out.stages.map((s) => [s.name, s]));
    expect(screen(byName.request!.sessionId!).trim().split('\n').at(-1)).toBe('passed');
    expect(byName.test!.summary).toBe('timed out after 1 s');
    expect(screen(byName.test!.sessionId!).trim().split('\n').map((l) => l.trim()).filter(Boolean)).toEqual([
      '$ sleep forever',
      'waiting',
      'timed out after 1 s',
    ]);
  });

  it('a stage the user cancels ends with "cancelled"', async () => {
    const { runner, screen } = setup();
    const abort = new AbortController();
    // The test stage says one line, the user presses Cancel, and it would otherwise run forever.
    const ssh = await guest((_script, ch) => {
      ch.write('running the suite\r\n');
      setTimeout(() => abort.abort(), 50);
    });
    const out = await runner.run({
      task: TASK, config: config('npm test'), ssh, signal: abort.signal, onStages: () => {},
      startAt: 'test', previous: [...PASSED_BEFORE_TEST, { name: 'test', status: 'pending' }],
    });
    expect(out.status).toBe('cancelled');
    const test = out.stages.find((s) => s.name === 'test')!;
    expect(screen(test.sessionId!).split('\n').map((l) => l.trim()).filter(Boolean)).toEqual(['$ npm test', 'running the suite', 'cancelled']);
  });

  it('a stage with no output still shows its command and exit line, and says "no output"', async () => {
    const { runner, screen } = setup();
    const ssh = await guest((script, ch) => {
      ch.exit(script.includes('false') ? 1 : 0);
      ch.end();
    });
    const out = await runner.run({
      task: TASK, config: config('false'), ssh, signal: new AbortController().signal, onStages: () => {},
      startAt: 'test', previous: [...PASSED_BEFORE_TEST, { name: 'test', status: 'pending' }],
    });
    const test = out.stages.find((s) => s.name === 'test')!;
    expect(test.summary).toBe('no output (test counts not recognised)');
    expect(screen(test.sessionId!).split('\n').map((l) => l.trim()).filter(Boolean)).toEqual(['$ false', 'exit status 1']);
  });

  it('a command from the repository cannot send escape sequences through the header', async () => {
    const { runner, logBytes } = setup();
    const hostile = 'npm test \x1b]0;pwned\x07\x1b[2J\x1b[31m';
    const out = await runner.run({
      task: TASK, config: config(hostile), ssh: await guest(failingTests), signal: new AbortController().signal, onStages: () => {},
      startAt: 'test', previous: [...PASSED_BEFORE_TEST, { name: 'test', status: 'pending' }],
    });
    const log = await logBytes(out.stages.find((s) => s.name === 'test')!.sessionId!);
    const header = log.slice(0, log.indexOf('\r\n'));
    expect(header).toBe('\x1b[38;5;246m$ npm test \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31m\x1b[0m');
  });

  it('a retry is the next attempt: its terminal is titled "test · attempt 2"', async () => {
    const { runner, terminals } = setup();
    const ssh = await guest(failingTests);
    const first = await runner.run({
      task: TASK, config: config('npm test'), ssh, signal: new AbortController().signal, onStages: () => {},
      startAt: 'test', previous: [...PASSED_BEFORE_TEST, { name: 'test', status: 'pending' }],
    });
    const firstTest = first.stages.find((s) => s.name === 'test')!;
    expect(firstTest.attempt).toBe(1);
    // Retry as the task service does: the plan from the failed task, then the runner from its start.
    const plan = planRetry({ ...TASK, phase: 'failed', stages: first.stages });
    expect(plan.stages.find((s) => s.name === 'test')).toEqual({ name: 'test', status: 'pending', attempt: 1 });
    const second = await runner.run({
      task: TASK, config: config('npm test'), ssh, signal: new AbortController().signal, onStages: () => {},
      startAt: plan.start, previous: plan.stages,
    });
    const test = second.stages.find((s) => s.name === 'test')!;
    expect(test.attempt).toBe(2);
    expect(terminals.list(TASK.id).map((t) => t.title)).toEqual(['test', 'test · attempt 2']);
  });

  it('stages with nothing to do are skipped with their reason and the pipeline still passes; beforeStage runs before each', async () => {
    const { runner } = setup();
    // Nothing in this work tree to build or test: the probe finds no files and no tools.
    const ssh = await guest((_script, ch) => {
      ch.write('ok\r\n');
      ch.exit(0);
      ch.end();
    });
    const steps: string[] = [];
    const out = await runner.run({
      task: TASK, config: defaultPipelineConfig(), ssh, signal: new AbortController().signal, onStages: () => {},
      beforeStage: (stage) => void steps.push(stage),
    });
    expect(out.status).toBe('passed');
    expect(steps).toEqual(['request', 'plan', 'build', 'test', 'review', 'document']);
    expect(out.stages.map((s) => `${s.name}:${s.status}:${s.summary}`)).toEqual([
      'request:passed:ok',
      'plan:skipped:no plan command configured and no agent chosen',
      'build:skipped:no build step found',
      `test:skipped:${NO_TEST_COMMAND}`,
      'review:skipped:no review command configured and no agent chosen',
      'document:skipped:no document command configured and no agent chosen',
    ]);
  });

  it('an error from beforeStage fails that stage with its message', async () => {
    const { runner } = setup();
    const out = await runner.run({
      task: TASK, config: defaultPipelineConfig(), ssh: await guest(failingTests), signal: new AbortController().signal, onStages: () => {},
      beforeStage: (stage) => {
        if (stage === 'build') throw new Error('the proxy could not switch to the build step');
      },
    });
    expect(out.status).toBe('failed');
    expect(out.failedStage).toBe('build');
    expect(out.stages.find((s) => s.name === 'build')!.summary).toContain('the proxy could not switch to the build step');
  });
});
