// Terminal logs on disk through a real TerminalService and real ptys: written
// off the main thread yet complete and in order, failures reported (in a warning
// and in the replay after a restart), a stuck disk (a FIFO nobody reads) neither
// stalls the terminal nor grows memory, logs deleted with their task and by age.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TerminalDataEvent } from '../../../common/contract.js';
import { spawnHostShell } from '../../../main/terminal/host-shell.js';
import { droppedMarker, SessionLog } from '../../../main/terminal/session-log.js';
import { TerminalService, type TerminalServiceDeps, type TerminalServiceOptions } from '../../../main/terminal/terminal-service.js';

const DAY = 24 * 60 * 60 * 1000;
let dir: string;
let services: TerminalService[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'term-log-'));
});
afterEach(async () => {
  await Promise.all(services.map((s) => s.dispose()));
  services = [];
  fs.rmSync(dir, { recursive: true, force: true });
});

function makeService(opts: { options?: Partial<TerminalServiceOptions> } & Partial<Pick<TerminalServiceDeps, 'retentionDays' | 'now'>> = {}) {
  const data: TerminalDataEvent[] = [];
  const warnings: string[] = [];
  const svc = new TerminalService({
    logDir: path.join(dir, 'logs'),
    emit: () => {},
    emitData: (e) => data.push(e),
    warn: (m) => warnings.push(m),
    ...opts,
  });
  services.push(svc);
  const bytesOf = (id: string) => Buffer.concat(data.filter((d) => d.sessionId === id).map((d) => Buffer.from(d.data)));
  return { svc, warnings, bytesOf };
}

/** A real pty running `cmd` through sh, held open until Enter so the last output is read before the hangup. */
function held(cmd: string) {
  return spawnHostShell({ cwd: dir, cols: 80, rows: 24, shell: '/bin/sh', args: ['-c', `${cmd}; read _end`] });
}

async function runToEnd(svc: TerminalService, id: string, output: () => Buffer, marker: string) {
  await waitFor(() => output().includes(marker));
  svc.write(id, '\r');
  return svc.waitForExit(id);
}

function seqText(n: number): string {
  return Array.from({ length: n }, (_, i) => String(i + 1)).join('\r\n') + '\r\n';
}

function logFile(id: string): string {
  return path.join(dir, 'logs', `${id}.log`);
}

describe('terminal logs written off the main thread', () => {
  it('a flood through a real pty lands in its log complete and in order', async () => {
    const { svc, warnings, bytesOf } = makeService({ options: { batch: { delayMs: 2, maxChunkBytes: 4096 } } });
    const info = svc.register({ taskId: 't1', kind: 'stage', title: 'flood', cols: 80, rows: 24, source: held('seq 1 200000').source, persistLog: true });
    expect((await runToEnd(svc, info.id, () => bytesOf(info.id), '\n200000\r\n')).code).toBe(0);
    await svc.logSettled(info.id);
    const logged = fs.readFileSync(logFile(info.id));
    // Byte for byte what the viewer got, and that is seq's output in order.
    expect(logged.equals(bytesOf(info.id))).toBe(true);
    expect(logged.toString('utf8').startsWith(seqText(200000))).toBe(true);
    expect(svc.stats(info.id)).toMatchObject({ logQueued: 0, logDropped: 0, logError: null });
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'logs', `${info.id}.json`), 'utf8'));
    expect(meta).toMatchObject({ info: { id: info.id, status: 'exited', exitCode: 0 }, endedAt: expect.any(Number) });
    expect(warnings).toEqual([]);
  });

  it('a log that cannot rotate is reported, the terminal goes on, and the replay after a restart says the log is incomplete', async () => {
    const first = makeService({ options: { maxLogBytes: 10_000, batch: { delayMs: 1, maxChunkBytes: 1000 } } });
    const { source } = held('seq 1 20000');
    const info = first.svc.register({ taskId: 't1', kind: 'stage', title: 'big', cols: 80, rows: 24, source, persistLog: true });
    // Something took the rotated log's name: a folder that is not empty.
    fs.mkdirSync(`${logFile(info.id)}.1/occupied`, { recursive: true });
    expect((await runToEnd(first.svc, info.id, () => first.bytesOf(info.id), '\n20000\r\n')).code).toBe(0);
    await first.svc.logSettled(info.id);
    // The viewer and the in-memory tail are whole; the failure was said, with its cause.
    expect(first.bytesOf(info.id).toString().startsWith(seqText(20000))).toBe(true);
    expect(first.svc.tail(info.id, 30)).toMatch(/20000\n/);
    expect(first.warnings.join('\n')).toMatch(new RegExp(`${info.id}.*(EISDIR|ENOTEMPTY|EEXIST)`));
    expect(first.svc.stats(info.id).logError).toMatch(/EISDIR|ENOTEMPTY|EEXIST/);
    expect(fs.statSync(logFile(info.id)).size).toBeLessThanOrEqual(10_000);
    await first.svc.dispose();

    const second = makeService();
    const replay = Buffer.from(second.svc.attach(info.id).scrollback, 'base64').toString('utf8');
    expect(replay.startsWith('1\r\n2\r\n3\r\n')).toBe(true);
    expect(replay).toMatch(/\[factory: this log is incomplete: .*(EISDIR|ENOTEMPTY|EEXIST).*\]/);
  });

  it('a stuck disk (a FIFO nobody reads) holds the source, then lets it go; memory stays capped and a marker counts what is missing', async () => {
    const fifo = path.join(dir, 'stuck.log');
    execFileSync('mkfifo', [fifo]);
    const pressure: boolean[] = [];
    const errors: Error[] = [];
    const limits = { high: 64 * 1024, low: 16 * 1024, hardCap: 256 * 1024, stallMs: 300, maxWriteBytes: 32 * 1024 };
    const log = new SessionLog({
      file: fifo,
      metaFile: path.join(dir, 'stuck.json'),
      maxLogBytes: 1 << 30,
      limits,
      onPressure: (hold) => pressure.push(hold),
      onError: (e) => errors.push(e),
    });
    const chunk = (i: number) => Buffer.alloc(16 * 1024, 0x41 + (i % 26));
    // Opening a FIFO for writing blocks until a reader comes: no write can finish.
    for (let i = 0; i < 4; i++) log.append(chunk(i));
    expect(pressure).toEqual([true]);
    const loopStart = Date.now();
    await new Promise((r) => setTimeout(r, 50));
    expect(Date.now() - loopStart).toBeLessThan(1000); // the event loop runs meanwhile
    await waitFor(() => pressure.length === 2);
    expect(pressure).toEqual([true, false]);
    expect(errors[0]?.message).toMatch(/took no write .* for 300 ms/);
    // Let go: output keeps coming; the queue fills to the hard cap, less room for the marker, and the rest is left out.
    for (let i = 4; i < 40; i++) log.append(chunk(i));
    const keptChunks = Math.floor((limits.hardCap - droppedMarker(Number.MAX_SAFE_INTEGER).length) / (16 * 1024));
    expect(log.queuedBytes).toBe(keptChunks * 16 * 1024);
    const dropped = log.droppedBytes;
    expect(dropped).toBe((40 - keptChunks) * 16 * 1024);
    // The disk comes back (a reader opens the FIFO): everything kept arrives, then the marker, then new output.
    const reader = readAll(fifo);
    await waitFor(() => log.queuedBytes === 0);
    log.append(Buffer.from('after'));
    await log.end();
    const got = await reader;
    const kept = Buffer.concat(Array.from({ length: keptChunks }, (_, i) => chunk(i)));
    expect(got.subarray(0, kept.length).equals(kept)).toBe(true);
    expect(got.subarray(kept.length).toString()).toBe(
      `\r\n[factory: ${dropped} bytes of output are missing from this log: the disk did not keep up]\r\nafter`,
    );
    expect(log.queuedBytes).toBe(0);
  });

  it('holds no more than the hard cap, the markers for what was left out included', async () => {
    const fifo = path.join(dir, 'capped.log');
    execFileSync('mkfifo', [fifo]);
    const limits = { high: 16 * 1024, low: 4 * 1024, hardCap: 64 * 1024, stallMs: 200, maxWriteBytes: 16 * 1024 };
    const pressure: boolean[] = [];
    const log = new SessionLog({ file: fifo, metaFile: path.join(dir, 'capped.json'), maxLogBytes: 1 << 30, limits, onPressure: (h) => pressure.push(h), onError: () => {} });
    log.append(Buffer.alloc(16 * 1024, 0x61));
    // The disk takes nothing; once it is taken as stuck, the source is let go and output is left out past the cap.
    await waitFor(() => pressure.length === 2);
    for (let i = 0; i < 8; i++) log.append(Buffer.alloc(16 * 1024, 0x62));
    expect(log.droppedBytes).toBeGreaterThan(0);
    // A chunk that would fit by itself, but not with the marker owed before it, is left out too.
    const room = limits.hardCap - log.queuedBytes - droppedMarker(Number.MAX_SAFE_INTEGER).length;
    expect(room).toBeGreaterThan(0);
    const droppedBefore = log.droppedBytes;
    log.append(Buffer.alloc(room, 0x63));
    expect(log.droppedBytes).toBe(droppedBefore + room);
    expect(log.queuedBytes + droppedMarker(log.droppedBytes).length).toBeLessThanOrEqual(limits.hardCap);
    // Closing adds the marker: still within the cap.
    const ended = log.end();
    expect(log.queuedBytes).toBeLessThanOrEqual(limits.hardCap);
    const got = readAll(fifo);
    await ended;
    expect((await got).toString()).toMatch(new RegExp(`\\[factory: ${log.droppedBytes} bytes of output are missing from this log: the disk did not keep up\\]\\r\\n$`));
  });

  it('a stuck log disk stalls neither the stage nor the shutdown', async () => {
    const { svc, warnings, bytesOf } = makeService({
      options: {
        logQueue: { high: 64 * 1024, low: 16 * 1024, hardCap: 256 * 1024, stallMs: 300, maxWriteBytes: 64 * 1024 },
        shutdownWaitMs: 500,
      },
    });
    const { source } = held('seq 1 100000');
    const info = svc.register({ taskId: 't1', kind: 'stage', title: 'flood', cols: 80, rows: 24, source, persistLog: true });
    // The log's name is taken by a FIFO nobody reads before its first write: opening it never returns.
    const fifo = logFile(info.id);
    execFileSync('mkfifo', [fifo]);
    const exit = await runToEnd(svc, info.id, () => bytesOf(info.id), '\n100000\r\n');
    expect(exit).toEqual({ code: 0, lost: false });
    expect(bytesOf(info.id).toString().startsWith(seqText(100000))).toBe(true);
    expect(svc.stats(info.id).logHolds).toBeGreaterThan(0);
    expect(svc.stats(info.id).logQueued).toBeLessThanOrEqual(256 * 1024);
    expect(warnings.join('\n')).toMatch(/took no write .* for 300 ms/);
    const t0 = Date.now();
    await svc.dispose();
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(warnings.join('\n')).toMatch(/not all written within 500 ms/);
    // Unblock the writer's open so no thread stays stuck after the test; it then writes what it kept.
    const got = await readAll(fifo);
    expect(got.subarray(0, 64 * 1024).toString()).toBe(seqText(100000).slice(0, 64 * 1024));
  });
});

describe('terminal logs removed with their task and by age', () => {
  it('removing a task kills its live sessions, forgets them all and deletes their logs; other tasks keep theirs', async () => {
    const { svc, bytesOf } = makeService();
    const done = svc.register({ taskId: 'task-a', kind: 'stage', title: 'build', cols: 80, rows: 24, source: held('echo built').source, persistLog: true });
    await runToEnd(svc, done.id, () => bytesOf(done.id), 'built\r\n');
    const running = spawnHostShell({ cwd: dir, cols: 80, rows: 24, shell: '/bin/sh', args: ['-c', 'echo running; sleep 60'] });
    const live = svc.register({ taskId: 'task-a', kind: 'stage', title: 'test', cols: 80, rows: 24, source: running.source, persistLog: true });
    const shell = spawnHostShell({ cwd: dir, cols: 80, rows: 24, shell: '/bin/sh', args: ['-c', 'sleep 60'] });
    svc.register({ taskId: 'task-a', kind: 'host', title: 'host', cols: 80, rows: 24, source: shell.source });
    const other = svc.register({ taskId: 'task-b', kind: 'stage', title: 'build', cols: 80, rows: 24, source: held('echo other').source, persistLog: true });
    await runToEnd(svc, other.id, () => bytesOf(other.id), 'other\r\n');
    const loose = svc.register({ kind: 'host', title: 'no task', cols: 80, rows: 24, source: held('echo loose').source, persistLog: true });
    await runToEnd(svc, loose.id, () => bytesOf(loose.id), 'loose\r\n');
    await waitFor(() => bytesOf(live.id).includes('running'));
    await Promise.all([done.id, live.id, other.id, loose.id].map((id) => svc.logSettled(id)));

    await expect(svc.removeTaskSessions('')).rejects.toMatchObject({ name: 'InvalidInput' });
    expect(await svc.removeTaskSessions('task-a')).toBe(3);
    expect(svc.list('task-a')).toEqual([]);
    expect(isAlive(running.pid)).toBe(false);
    expect(isAlive(shell.pid)).toBe(false);
    const files = fs.readdirSync(path.join(dir, 'logs'));
    expect(files.filter((f) => f.startsWith(done.id) || f.startsWith(live.id))).toEqual([]);
    expect(files.sort()).toEqual([`${loose.id}.json`, `${loose.id}.log`, `${other.id}.json`, `${other.id}.log`].sort());
    expect(svc.list().map((i) => i.id).sort()).toEqual([loose.id, other.id].sort());
    expect(() => svc.attach(live.id)).toThrow(/no terminal session/);
    // A restart does not bring them back.
    await svc.dispose();
    expect(makeService().svc.list().map((i) => i.id).sort()).toEqual([loose.id, other.id].sort());
  });

  it('deletes at start-up the logs of sessions that ended more than the retention ago; 0 keeps them all', async () => {
    const t0 = Date.UTC(2030, 0, 1);
    const first = makeService({ now: () => t0 });
    const info = first.svc.register({ taskId: 't1', kind: 'stage', title: 'build', cols: 80, rows: 24, source: held('echo old-output').source, persistLog: true });
    await runToEnd(first.svc, info.id, () => first.bytesOf(info.id), 'old-output\r\n');
    await first.svc.dispose();
    const files = () => fs.readdirSync(path.join(dir, 'logs')).sort();
    expect(files()).toEqual([`${info.id}.json`, `${info.id}.log`]);

    // 29 days later with 30 kept: still there.
    expect(makeService({ now: () => t0 + 29 * DAY, retentionDays: 30 }).svc.list().map((i) => i.id)).toEqual([info.id]);
    // 0 keeps logs forever, however old.
    expect(makeService({ now: () => t0 + 3000 * DAY, retentionDays: 0 }).svc.list().map((i) => i.id)).toEqual([info.id]);
    expect(files()).toEqual([`${info.id}.json`, `${info.id}.log`]);
    // 31 days later: gone from the list and from the disk, and said so.
    const later = makeService({ now: () => t0 + 31 * DAY, retentionDays: 30 });
    expect(later.svc.list()).toEqual([]);
    expect(files()).toEqual([]);
    expect(later.warnings.join('\n')).toMatch(/removed the logs of 1 terminal session\(s\) older than 30 days/);
  });

  it('judges leftovers without metadata by their file time and leaves files that are not ours alone', () => {
    const logs = path.join(dir, 'logs');
    fs.mkdirSync(logs, { recursive: true });
    const old = new Date(Date.now() - 40 * DAY);
    const write = (name: string, when?: Date) => {
      fs.writeFileSync(path.join(logs, name), 'x');
      if (when) fs.utimesSync(path.join(logs, name), when, when);
    };
    write('term-orphan.log', old); // its metadata never got written (a crash)
    write('term-orphan.log.1', old);
    write('term-corrupt.json', old); // unreadable metadata
    write('term-fresh.log'); // a leftover from today
    write('notes.txt', old); // not ours by name
    fs.mkdirSync(path.join(logs, 'term-dir.log')); // not a file
    fs.utimesSync(path.join(logs, 'term-dir.log'), old, old);
    const target = path.join(dir, 'precious.txt');
    fs.writeFileSync(target, 'keep me');
    fs.symlinkSync(target, path.join(logs, 'term-link.log'));
    const { svc, warnings } = makeService({ retentionDays: 30 });
    expect(svc.list()).toEqual([]);
    expect(fs.readdirSync(logs).sort()).toEqual(['notes.txt', 'term-dir.log', 'term-fresh.log', 'term-link.log']);
    expect(fs.readFileSync(target, 'utf8')).toBe('keep me');
    expect(warnings.join('\n')).toMatch(/unreadable terminal log metadata term-corrupt\.json/);
  });

  it('a full disk mid-write leaves no half-written metadata, and a crash’s leftover goes at start-up', async () => {
    const { svc, warnings, bytesOf } = makeService();
    const info = svc.register({ taskId: 't1', kind: 'stage', title: 'build', cols: 80, rows: 24, source: held('echo on-full-disk').source, persistLog: true });
    await svc.logSettled(info.id);
    // The kernel's own "no space left" for the next metadata write: its temp file is /dev/full.
    const tmp = path.join(dir, 'logs', `${info.id}.json.tmp`);
    fs.symlinkSync('/dev/full', tmp);
    await runToEnd(svc, info.id, () => bytesOf(info.id), 'on-full-disk\r\n');
    await svc.logSettled(info.id);
    expect(warnings.join('\n')).toMatch(/ENOSPC/);
    expect(fs.existsSync(tmp)).toBe(false);
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'logs', `${info.id}.json`), 'utf8')).info.id).toBe(info.id);
    await svc.dispose();

    // The app killed mid-write leaves a temp file; the next start removes it and keeps the session.
    fs.writeFileSync(tmp, '{"half":');
    expect(makeService().svc.list().map((i) => i.id)).toEqual([info.id]);
    expect(fs.existsSync(tmp)).toBe(false);
  });

  it('refuses a retention that is not a whole number of days, by name', () => {
    for (const bad of [-1, 1.5, Number.NaN]) {
      expect(() => makeService({ retentionDays: bad })).toThrow(/retention of .* days is not a whole number of days/);
    }
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function readAll(file: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    fs.createReadStream(file)
      .on('data', (d) => parts.push(d as Buffer))
      .on('end', () => resolve(Buffer.concat(parts)))
      .on('error', reject);
  });
}

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
