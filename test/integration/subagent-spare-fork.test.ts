// A hooks session's spare fork (issue 27), with the real app, real QEMU and
// the warm pool on, as a user's session would have them: once the session's
// sandbox has been idle, a subagent's sandbox is the spare made then — the
// session's state, on another machine, ready at once. A command in the
// session's sandbox after the spare was made makes it stale: the next subagent
// gets a fork of the sandbox as it is then and sees that command's file, never
// the older state. `factory status` counts the spare; when the session ends
// no spare is left running. (The real
// Claude Code CLI driving SubagentStart is hooks-claude-code.test.ts.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FactoryClient } from '../../main/cli/client.js';
import { qemuProcessesUnder } from '../e2e/support/processes.js';
import { runCli, stopApp } from '../support/cli.js';
import { testImage } from '../support/image.js';
import { makeRepo, type FixtureRepo } from '../support/repo.js';
import { waitFor } from '../support/factory-wrapper.js';

let root: string;
let dataDir: string;
let repo: FixtureRepo;
let client: FactoryClient;
const SESSION = 'spare-session';

const appLog = () => {
  const f = path.join(dataDir, 'logs', 'app.log');
  return fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '';
};
const spareReadyLines = () => appLog().split('\n').filter((l) => l.includes('a spare fork of the session’s sandbox is ready'));

/** A command in a sandbox of the session (the subagent's with agentId), as the PreToolUse hook routes it. */
async function run(command: string, agentId?: string): Promise<string> {
  const r = await client.call('sessions.run', { sessionId: SESSION, command, dir: '', ...(agentId ? { agentId } : {}) });
  const out = Buffer.from(r.stdout, 'base64').toString('utf8');
  expect(r.exitCode, Buffer.from(r.stderr, 'base64').toString('utf8')).toBe(0);
  return out.trim();
}

beforeAll(async () => {
  await testImage();
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'spare-fork-'));
  dataDir = path.join(root, 'data');
  repo = await makeRepo({ files: { 'README.md': '# spare\n' } });
  // The warm pool on (the suite turns it off): spare forks are made only while it is.
  const ls = await runCli(dataDir, ['ls'], { env: { FACTORY_WARM_POOL: '1' } });
  expect(ls.code, ls.stderr).toBe(0);
  client = await FactoryClient.connect(path.join(dataDir, 'factory.sock'));
}, 10 * 60_000);

afterAll(async () => {
  client?.close();
  if (dataDir) await stopApp(dataDir);
  repo?.cleanup();
  if (root && process.env.FACTORY_KEEP_TEST_DIR !== '1') fs.rmSync(root, { recursive: true, force: true });
});

describe.skipIf(process.platform !== 'linux')('a hooks session’s spare fork for its subagents', () => {
  it('hands an idle session’s spare to a subagent, never a stale one, and leaves none after the session', async () => {
    const started = await client.call('sessions.start', { sessionId: SESSION, cwd: repo.dir });
    const sessionTask = started.task.id;
    const sessionMachine = await run('echo one > ~/state-marker && cat /etc/machine-id');
    expect(sessionMachine).toMatch(/^[0-9a-f]{32}$/);

    // Idle: the spare of the state with "one" is made.
    await waitFor('a spare fork of the idle session', () => spareReadyLines().length >= 1, 180_000);
    // What holds memory is said: `factory status` counts the spare.
    expect((await runCli(dataDir, ['status'])).stdout).toContain('1 spare fork of session sandboxes for their subagents');
    const t0 = performance.now();
    const a = await client.call('sessions.subagentStart', { sessionId: SESSION, agentId: 'agent-a', agentType: 'Explore' });
    const readyMs = performance.now() - t0;
    expect(a.task.setup?.summary).toContain('its spare fork');
    const aOut = await run('cat ~/state-marker; cat /etc/machine-id; git rev-parse --abbrev-ref HEAD', 'agent-a');
    const [aMarker, aMachine, aBranch] = aOut.split('\n');
    expect(aMarker).toBe('one');
    expect(aMachine).toMatch(/^[0-9a-f]{32}$/);
    expect(aMachine, 'the spare was re-keyed: a machine of its own').not.toBe(sessionMachine);
    expect(aBranch).toBe(a.task.branch);
    console.log(`subagent sandbox from the spare fork ready ${readyMs.toFixed(0)} ms after SubagentStart`);
    const aStop = await client.call('sessions.subagentStop', { sessionId: SESSION, agentId: 'agent-a' });
    expect(aStop.destroyed).toBe(true);

    // The session works on; a spare made before this command is of an older state.
    const linesBefore = spareReadyLines().length;
    await waitFor('the next spare', () => spareReadyLines().length > linesBefore, 180_000);
    await run('echo two > ~/state-marker');
    const b = await client.call('sessions.subagentStart', { sessionId: SESSION, agentId: 'agent-b' });
    expect(b.task.setup?.summary).toMatch(/^forked from the sandbox of task /);
    expect(b.task.setup?.summary).not.toContain('spare');
    expect(await run('cat ~/state-marker', 'agent-b'), 'the subagent has the session’s state after its last command').toBe('two');
    expect(appLog()).toContain('the spare fork was older than the session’s sandbox');
    await client.call('sessions.subagentStop', { sessionId: SESSION, agentId: 'agent-b' });

    const end = await client.call('sessions.end', { sessionId: SESSION });
    expect(end.destroyed).toBe(true);
    // Nothing of the session runs any more: only the pool's own waiting sandbox may (one, its folder the only one).
    await waitFor('the spare is gone', () => qemuProcessesUnder(dataDir).length <= 1, 60_000);
    expect((await runCli(dataDir, ['status'])).stdout).not.toContain('spare fork');
    const poolDirs = fs.readdirSync(path.join(dataDir, 'pool')).filter((d) => !fs.existsSync(path.join(dataDir, 'pool', d, 'pool-taken.log')));
    expect(poolDirs.length).toBeLessThanOrEqual(1);
    expect(qemuProcessesUnder(dataDir).every((p) => !p.cmdline.includes(sessionTask))).toBe(true);
  }, 15 * 60_000);
});
