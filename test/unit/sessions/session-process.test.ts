// Finding the Claude Code process behind a hook, with real processes: a
// "session" process that runs the hook through a shell, as Claude Code does.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { apiInputs } from '../../../common/contract.js';
import { processAlive, psStat, readStat, sessionProcess } from '../../../main/sessions/session-process.js';

const linux = process.platform === 'linux';

describe.skipIf(!linux)('the session process of a hook', () => {
  it('skips the shell Claude Code runs the hook through and finds the session behind it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-proc-'));
    const out = path.join(dir, 'out.json');
    // session (node) → bash -c → node (the hook): the hook reports what it found.
    const hook = `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify({ found: require(${JSON.stringify(path.resolve('main/sessions/session-process.ts'))}).sessionProcess(), shell: process.ppid }))`;
    const session = spawn(process.execPath, ['--import', 'tsx', '-e', `require('child_process').execFileSync('bash', ['-c', ${JSON.stringify(`${process.execPath} --import tsx -e ${JSON.stringify(hook).replace(/\$/g, '\\$')}; true`)}], { stdio: 'inherit' })`], { stdio: 'inherit' });
    await new Promise((r) => session.on('exit', r));
    const got = JSON.parse(fs.readFileSync(out, 'utf8')) as { found: { pid: number; start?: string }; shell: number };
    expect(got.shell).not.toBe(session.pid);
    expect(got.found.pid).toBe(session.pid);
    expect(got.found.start).toMatch(/^\d+$/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('skips the factory CLI run through its #! line (the process is named after the script)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'session-proc-'));
    const out = path.join(dir, 'out.json');
    const hook = `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(require(${JSON.stringify(path.resolve('main/sessions/session-process.ts'))}).sessionProcess()))`;
    // A `factory` on PATH that is a script, as npm's bin link or a wrapper is: it keeps running while the hook's node does.
    fs.writeFileSync(path.join(dir, 'factory'), `#!/bin/bash\n${process.execPath} --import tsx -e ${JSON.stringify(hook).replace(/\$/g, '\\$')}\nexit $?\n`, { mode: 0o755 });
    const session = spawn(process.execPath, ['-e', `require('child_process').execFileSync(${JSON.stringify(path.join(dir, 'factory'))}, { stdio: 'inherit' })`], { stdio: 'inherit' });
    await new Promise((r) => session.on('exit', r));
    expect((JSON.parse(fs.readFileSync(out, 'utf8')) as { pid: number }).pid).toBe(session.pid);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads a process whose name holds spaces and parentheses', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-proc-'));
    fs.mkdirSync(path.join(dir, '42'));
    // Fields after comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime
    fs.writeFileSync(path.join(dir, '42', 'stat'), '42 (evil) 1 (x) S 7 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0\n');
    expect(readStat(42, dir)).toEqual({ comm: 'evil) 1 (x', ppid: 7, start: '987654' });
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a dead process, or a later one that got its pid, is not the session', async () => {
    const child = spawn('sleep', ['30']);
    const stat = readStat(child.pid!)!;
    expect(processAlive(child.pid!, stat.start)).toBe(true);
    expect(processAlive(child.pid!, String(Number(stat.start) + 1))).toBe(false);
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    expect(processAlive(child.pid!, stat.start)).toBe(false);
  });

  it('without /proc (macOS), ps gives the same walk and tells a reused pid apart', async () => {
    // This test process is the "session"; a shell it runs stands between it and the walk's start.
    const shell = spawn('bash', ['-c', 'sleep 30; true']);
    await new Promise((r) => setTimeout(r, 200));
    expect(sessionProcess(shell.pid!, psStat).pid).toBe(process.pid);
    expect(sessionProcess(shell.pid!, readStat).pid).toBe(process.pid);
    const me = psStat(process.pid)!;
    // Seconds since the epoch, within a few of when this process started.
    expect(me.start).toMatch(/^\d+$/);
    expect(Math.abs(Number(me.start) - (Date.now() / 1000 - process.uptime()))).toBeLessThan(5);
    expect(processAlive(process.pid, me.start, psStat)).toBe(true);
    expect(processAlive(process.pid, String(Date.parse('2001-01-01T00:00:00Z') / 1000), psStat)).toBe(false);
    // What the hook sends the app on a Mac passes the app's validation of sessions.start.
    const found = sessionProcess(shell.pid!, psStat);
    expect(apiInputs['sessions.start'].safeParse({ sessionId: 's1', cwd: '/r', pid: found.pid, pidStart: found.start }).success).toBe(true);
    shell.kill('SIGKILL');
  });
});
