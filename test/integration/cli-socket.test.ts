// The CLI's socket under attack, with the real app (started by the CLI itself,
// as a user's first command does; no VM is booted here): another user cannot
// connect, a 100 MB line is refused without being held, invalid JSON and unknown
// methods get named errors and the connection goes on, hostile input meets the
// same validation as the UI, and a second app on the same data dir is refused.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Task } from '../../common/domain.js';
import { ERRORS } from '../../common/errors.js';
import { ROOT, WEB_ENTRY, alive, appPid, runCli, runnable, stopApp } from '../support/cli.js';

const CliError = z.object({ error: z.object({ name: z.string(), title: z.string(), message: z.string(), help: z.string().optional() }) });

let dataDir: string;
let sock: string;

beforeAll(async () => {
  // Short: a unix socket path has a 108-byte limit.
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'fcli-'));
  const r = await runCli(dataDir, ['ls', '--json']);
  expect(r.code, r.stderr).toBe(0);
  expect(z.array(Task).parse(JSON.parse(r.stdout))).toEqual([]);
  expect(r.stderr).toContain('no app was running; starting one in the background');
  sock = path.join(dataDir, 'factory.sock');
});

afterAll(async () => {
  if (dataDir) {
    await stopApp(dataDir);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

/** A raw client: sends bytes, collects the host's lines until it closes or `until` is satisfied. */
function rawClient() {
  const socket = net.createConnection(sock);
  const lines: Array<Record<string, unknown>> = [];
  let buf = '';
  let closed = false;
  socket.on('data', (c: Buffer) => {
    buf += c.toString('utf8');
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      lines.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
      buf = buf.slice(nl + 1);
    }
  });
  socket.on('error', () => {});
  socket.on('close', () => (closed = true));
  const waitFor = async (pred: () => boolean, ms = 15_000) => {
    const end = Date.now() + ms;
    while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    return pred();
  };
  return { socket, lines, isClosed: () => closed, waitFor, reply: (id: unknown) => lines.find((l) => l.id === id) };
}

/** The headless apps running on a data folder (from /proc: their command line and environment). */
function appsOn(dir: string): number[] {
  const pids: number[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8');
      const env = fs.readFileSync(`/proc/${name}/environ`, 'utf8').split('\0');
      if (cmd.includes('--headless') && env.includes(`FACTORY_DATA_DIR=${dir}`)) pids.push(Number(name));
    } catch {
      // Gone while we looked, or not ours to read: not an app of this test.
    }
  }
  return pids;
}

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1]);
}

describe('the CLI socket', () => {
  it('is a 0600 socket in a 0700 folder that another local user cannot open', () => {
    expect(fs.statSync(sock).mode & 0o777).toBe(0o600);
    expect(fs.statSync(dataDir).mode & 0o777).toBe(0o700);
    if (process.getuid?.() !== 0) return; // switching user needs root; the modes above are what keeps others out
    // The user "nobody" tries to connect: the kernel refuses.
    const probe = `require('net').createConnection(${JSON.stringify(sock)}).on('error',e=>{console.log(e.code);process.exit(0)}).on('connect',()=>{console.log('CONNECTED');process.exit(0)})`;
    const out = execFileSync('setpriv', ['--reuid=nobody', '--regid=nogroup', '--clear-groups', process.execPath, '-e', probe], { encoding: 'utf8' });
    expect(out.trim()).toBe('EACCES');
  });

  it('answers invalid JSON, a missing id, an unknown method and a prototype name with named errors, and goes on', async () => {
    const c = rawClient();
    c.socket.write('not json at all\n');
    c.socket.write('{"method":"tasks.list"}\n');
    c.socket.write('{"id":1,"method":"tasks.nope"}\n');
    c.socket.write('{"id":2,"method":"__proto__"}\n');
    c.socket.write('{"id":3,"method":"constructor","input":{}}\n');
    c.socket.write('{"id":4,"method":"tasks.list","input":{}}\n');
    expect(await c.waitFor(() => c.reply(4) !== undefined)).toBe(true);
    expect(c.lines[0]).toMatchObject({ hello: { app: 'factory-in-a-box', protocol: 1 } });
    const nulls = c.lines.filter((l) => l.id === null);
    expect(nulls[0]).toMatchObject({ error: { name: 'InvalidInput', message: expect.stringMatching(/^the line is not JSON/) } });
    expect(nulls[1]).toMatchObject({ error: { name: 'InvalidInput', message: 'id: must be a number or string' } });
    expect(c.reply(1)).toMatchObject({ error: { name: 'UnknownMethod' } });
    expect(c.reply(2)).toMatchObject({ error: { name: 'UnknownMethod' } });
    expect(c.reply(3)).toMatchObject({ error: { name: 'UnknownMethod' } });
    expect(c.reply(4)).toEqual({ id: 4, result: [] });
    c.socket.destroy();
  });

  it('validates hostile input as the UI does, naming the field', async () => {
    const c = rawClient();
    const calls: Array<[string, unknown, RegExp]> = [
      ['tasks.get', { taskId: '../../etc/passwd' }, /^taskId: must be letters/],
      ['tasks.exec', { taskId: 'abc', argv: ['sh', '-c', 'a\u0000b'] }, /^argv\.2: a word cannot contain a NUL byte/],
      ['tasks.exec', { taskId: 'abc', argv: [] }, /^argv: no command given/],
      ['tasks.exec', { taskId: 'abc', argv: ['true'], stdin: 'not base64!' }, /^stdin: must be base64/],
      ['tasks.create', { repoPath: '/tmp', title: '   ' }, /^title: the task text is empty/],
      ['terminal.resize', { sessionId: 's', cols: 1e9, rows: 1 }, /^cols:/],
      ['tasks.approve', { taskId: 'abc', confirm: ['everything'] }, /^confirm\.0:/],
    ];
    calls.forEach(([method, input], i) => c.socket.write(JSON.stringify({ id: i + 1, method, input }) + '\n'));
    expect(await c.waitFor(() => calls.every((_, i) => c.reply(i + 1)))).toBe(true);
    calls.forEach(([, , msg], i) => {
      const r = c.reply(i + 1) as { error?: { name: string; message: string } };
      expect(r.error?.name, JSON.stringify(r)).toBe('InvalidInput');
      expect(r.error?.message).toMatch(msg);
    });
    c.socket.destroy();
  });

  it('refuses a 100 MB line with an error and closes, without holding it in memory', async () => {
    const pid = appPid(dataDir)!;
    const before = rssKb(pid);
    const c = rawClient();
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    let sent = 0;
    for (let i = 0; i < 100 && !c.isClosed(); i++) {
      const ok = c.socket.write(chunk);
      sent += chunk.length;
      if (!ok) await new Promise((r) => (c.isClosed() ? r(null) : c.socket.once('drain', r).once('close', r)));
    }
    expect(await c.waitFor(() => c.isClosed())).toBe(true);
    expect(c.lines.find((l) => l.id === null)).toMatchObject({ error: { name: 'InvalidInput', message: 'a message line is longer than 4194304 bytes' } });
    const grew = rssKb(pid) - before;
    expect(grew, `host RSS grew by ${grew} kB after ${sent} bytes were offered`).toBeLessThan(40 * 1024);
    // The host is still there for everyone else.
    const r = await runCli(dataDir, ['ls', '--json']);
    expect(r.code).toBe(0);
  });

  it('refuses a second app on the same data dir with a clear message', async () => {
    const web = runnable(WEB_ENTRY);
    const child = spawn(process.execPath, [...web.nodeArgs, web.file], { cwd: ROOT, env: { ...process.env, FACTORY_DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    expect(code).toBe(1);
    expect(out).toContain(`another Factory in a Box app (pid ${appPid(dataDir)}) is already using the data folder ${dataDir}`);
    // The first app still serves.
    expect(alive(appPid(dataDir)!)).toBe(true);
    expect(fs.existsSync(sock)).toBe(true);
  });

  it('names errors as the UI does, with --json for scripts, and exits non-zero', async () => {
    const show = await runCli(dataDir, ['show', 'no-such-task', '--json']);
    expect(show.code).toBe(1);
    expect(CliError.parse(JSON.parse(show.stdout)).error).toEqual({ name: 'TaskNotFound', ...ERRORS.TaskNotFound, message: 'no task has the id "no-such-task"' });
    const text = await runCli(dataDir, ['show', 'no-such-task']);
    expect(text.stderr).toContain(`error: ${ERRORS.TaskNotFound.title}: no task has the id "no-such-task"`);
    expect(text.stderr).toContain(ERRORS.TaskNotFound.help);
    const exec = await runCli(dataDir, ['exec', 'no-such-task', '--', 'true']);
    expect(exec.code).toBe(125);
    const usage = await runCli(dataDir, ['exec', 'abc']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('exec: no command after --');
    const run = await runCli(dataDir, ['run', path.join(dataDir, 'not-a-repo'), 'do it', '--json']);
    expect(run.code).toBe(1);
    expect(CliError.parse(JSON.parse(run.stdout)).error.name).toBe('NotAGitRepository');
  });
});

describe('starting the app', () => {
  it('takes over a lock left by a process that is gone', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fcli-'));
    try {
      const dead = spawn(process.execPath, ['-e', '0']);
      await new Promise((r) => dead.on('exit', r));
      fs.writeFileSync(path.join(dir, 'factory.lock'), `${dead.pid}\n`);
      fs.writeFileSync(path.join(dir, 'factory.sock'), 'stale');
      const r = await runCli(dir, ['ls']);
      expect(r.code, r.stderr).toBe(0);
      expect(appPid(dir)).not.toBe(dead.pid);
      expect(fs.statSync(path.join(dir, 'factory.sock')).isSocket()).toBe(true);
      // SIGTERM stops it cleanly: the socket and the lock go with it.
      await stopApp(dir);
      expect(fs.existsSync(path.join(dir, 'factory.sock'))).toBe(false);
      expect(fs.existsSync(path.join(dir, 'factory.lock'))).toBe(false);
    } finally {
      await stopApp(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('three commands typed at once where no app runs all get their answer from one app', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fcli-'));
    // A slow machine: the app opens its socket 5 s after it took the data folder's lock, so the
    // apps the other commands started have found the lock taken and ended before any socket exists.
    const slow = path.join(dir, 'slow-socket.cjs');
    fs.writeFileSync(
      slow,
      `const net = require('net'); const listen = net.Server.prototype.listen;
       net.Server.prototype.listen = function (...a) { if (String(a[0]).endsWith('factory.sock')) { setTimeout(() => listen.apply(this, a), 5000); return this; } return listen.apply(this, a); };`,
    );
    try {
      // Each finds no app and starts one; one takes the data folder, the others give way to it.
      const env = { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${slow}`.trim() };
      const results = await Promise.all([0, 1, 2].map(() => runCli(dir, ['ls', '--json'], { env })));
      for (const r of results) {
        expect(r.code, r.stderr).toBe(0);
        expect(z.array(Task).parse(JSON.parse(r.stdout))).toEqual([]);
      }
      // One app runs on the folder: the one holding its lock (the others end once they find it taken).
      const pid = appPid(dir)!;
      expect(alive(pid)).toBe(true);
      await expect.poll(() => appsOn(dir), { timeout: 30_000 }).toEqual([pid]);
    } finally {
      await stopApp(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says at once why the app it started ended, with the last lines of its log', async () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'fcli-'));
    // A data folder so deep that its socket path passes the unix socket limit: the app cannot serve the CLI.
    const dir = path.join(base, 'd'.repeat(110));
    try {
      const t0 = Date.now();
      const r = await runCli(dir, ['ls'], { timeoutMs: 60_000 });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('error: The app did not start: the app ended before it opened its socket (exit status 1)');
      expect(r.stderr).toMatch(/the socket path .* is longer than 103 bytes, the limit of a unix socket/);
      // Not the 120 s start timeout.
      expect(Date.now() - t0).toBeLessThan(45_000);
      expect(fs.existsSync(path.join(dir, 'factory.lock'))).toBe(false);
    } finally {
      fs.rmSync(base, { recursive: true, force: true });
    }
  });

  it('with --no-start, fails when no app runs instead of starting one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fcli-'));
    try {
      const r = await runCli(dir, ['ls', '--no-start']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`error: The app is not running: no Factory in a Box app runs on ${dir}`);
      expect(appPid(dir)).toBeUndefined();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
