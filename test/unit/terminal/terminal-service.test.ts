import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FactoryEvent, TerminalDataEvent } from '../../../common/contract.js';
import { spawnHostShell } from '../../../main/terminal/host-shell.js';
import { TerminalService, type TerminalServiceOptions } from '../../../main/terminal/terminal-service.js';
import type { TerminalSource } from '../../../main/terminal/types.js';

const ID_RE = /^[A-Za-z0-9._-]{1,128}$/;

let dir: string;
let services: TerminalService[] = [];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'term-svc-'));
});
afterEach(async () => {
  await Promise.all(services.map((s) => s.dispose()));
  services = [];
  fs.rmSync(dir, { recursive: true, force: true });
});

function makeService(options?: Partial<TerminalServiceOptions>) {
  const events: FactoryEvent[] = [];
  const data: TerminalDataEvent[] = [];
  const warnings: string[] = [];
  const svc = new TerminalService({
    logDir: path.join(dir, 'logs'),
    emit: (e) => events.push(e),
    emitData: (e) => data.push(e),
    warn: (m) => warnings.push(m),
    ...(options ? { options } : {}),
  });
  services.push(svc);
  const bytesOf = (id: string) => Buffer.concat(data.filter((d) => d.sessionId === id).map((d) => Buffer.from(d.data)));
  return { svc, events, data, bytesOf, warnings };
}

/** A real pty running a command through sh (no shell rc files, deterministic). */
function ptyCommand(cmd: string, cols = 80, rows = 24) {
  return spawnHostShell({ cwd: dir, cols, rows, shell: '/bin/sh', args: ['-c', cmd] }).source;
}

/**
 * A command that waits for Enter before it ends. When a pty's session leader
 * exits, Linux hangs the pty up and discards output not yet read, so a test of
 * "every byte arrives" lets the reader see the last line before the end.
 */
function ptyCommandHeld(cmd: string, cols = 80, rows = 24) {
  return ptyCommand(`${cmd}; read _end`, cols, rows);
}

async function releaseWhenSeen(svc: TerminalService, id: string, output: () => Buffer, marker: string) {
  await waitFor(() => output().includes(marker));
  svc.write(id, '\r');
  return svc.waitForExit(id);
}

/** Wraps a source to count pause/resume calls as the service makes them. */
function counting(src: TerminalSource) {
  const counts = { pause: 0, resume: 0 };
  const wrapped: TerminalSource = {
    ...src,
    pause: () => {
      counts.pause++;
      src.pause();
    },
    resume: () => {
      counts.resume++;
      src.resume();
    },
  };
  return { wrapped, counts };
}

describe('TerminalService with a real pty', () => {
  it('delivers a command’s whole output, announces open and exit, ids fit the contract', async () => {
    const { svc, events, bytesOf } = makeService();
    const info = svc.register({ kind: 'host', title: 'seq', cols: 80, rows: 24, source: ptyCommand('seq 1 20000; read _end; exit 3') });
    expect(info.id).toMatch(ID_RE);
    expect(info.status).toBe('live');
    expect(events[0]).toEqual({ type: 'terminal.opened', info });
    const exit = await releaseWhenSeen(svc, info.id, () => bytesOf(info.id), '\n20000\r\n');
    expect(exit).toEqual({ code: 3, lost: false });
    const text = bytesOf(info.id).toString('utf8');
    const expected = Array.from({ length: 20000 }, (_, i) => String(i + 1)).join('\r\n') + '\r\n';
    expect(text.slice(0, expected.length)).toBe(expected);
    const status = events.find((e) => e.type === 'terminal.status');
    expect(status).toMatchObject({ info: { id: info.id, status: 'exited', exitCode: 3 } });
    expect(svc.list()[0]).toMatchObject({ status: 'exited', exitCode: 3 });
    expect(svc.tail(info.id, 20)).toMatch(/19999\n20000\n\n?$/);
  });

  it('batches into chunks no larger than the cap', async () => {
    const { svc, data, bytesOf } = makeService({ batch: { delayMs: 5, maxChunkBytes: 4096 } });
    const info = svc.register({ kind: 'host', title: 'seq', cols: 80, rows: 24, source: ptyCommandHeld('seq 1 50000') });
    await releaseWhenSeen(svc, info.id, () => bytesOf(info.id), '\n50000\r\n');
    const mine = data.filter((d) => d.sessionId === info.id);
    expect(Math.max(...mine.map((d) => d.data.byteLength))).toBeLessThanOrEqual(4096);
    // ~290 kB in far fewer events than the pty's reads would make one by one at 5 ms batching
    expect(mine.length).toBeGreaterThanOrEqual(Math.ceil(288894 / 4096));
  });

  it('passes multi-byte UTF-8 through unchanged even when reads split characters', async () => {
    const { svc, bytesOf } = makeService({ batch: { delayMs: 1, maxChunkBytes: 5 } });
    const line = 'héllo 日本語 🎉';
    const info = svc.register({ kind: 'host', title: 'utf8', cols: 80, rows: 24, source: ptyCommandHeld(`for i in 1 2 3 4 5; do printf '%s\\n' '${line}'; done; echo END`) });
    await releaseWhenSeen(svc, info.id, () => bytesOf(info.id), 'END\r\n');
    const dec = new TextDecoder();
    expect(dec.decode(bytesOf(info.id))).toMatch(new RegExp(`^(${line}\r\n){5}END\r\n`));
  });

  it('pauses the source above the high watermark, resumes on ack, and loses nothing', async () => {
    const { svc, bytesOf } = makeService({ watermarks: { high: 64 * 1024, low: 16 * 1024 }, batch: { delayMs: 2, maxChunkBytes: 16 * 1024 } });
    const { wrapped, counts } = counting(ptyCommandHeld('seq 1 300000')); // ~2 MB
    const info = svc.register({ kind: 'host', title: 'flood', cols: 80, rows: 24, source: wrapped });
    svc.attach(info.id);
    // A slow viewer: acknowledges what it received every 20 ms.
    let acked = 0;
    let maxUnacked = 0;
    const viewer = setInterval(() => {
      const st = svc.stats(info.id);
      maxUnacked = Math.max(maxUnacked, st.unacked);
      const received = bytesOf(info.id).length;
      svc.ack(info.id, received - acked);
      acked = received;
    }, 20);
    const exit = await releaseWhenSeen(svc, info.id, () => bytesOf(info.id), '\n300000\r\n');
    clearInterval(viewer);
    expect(exit.code).toBe(0);
    expect(counts.pause).toBeGreaterThan(0);
    expect(counts.resume).toBeGreaterThan(0);
    // Unacknowledged bytes never exceed high watermark + what was already in flight (one pty read + one chunk).
    expect(maxUnacked).toBeLessThan(64 * 1024 + 2 * 16 * 1024 + 64 * 1024);
    const lines = bytesOf(info.id).toString().split('\r\n');
    expect(lines.slice(0, 300000)).toEqual(Array.from({ length: 300000 }, (_, i) => String(i + 1)));
  });

  it('a viewer that stops acknowledging is dropped after the stall timeout and the stage finishes', async () => {
    const { svc } = makeService({ watermarks: { high: 8 * 1024, low: 1024 }, viewerStallMs: 200 });
    const { wrapped, counts } = counting(ptyCommand('seq 1 100000'));
    const info = svc.register({ kind: 'stage', title: 'stage', cols: 80, rows: 24, source: wrapped });
    svc.attach(info.id); // and never acks
    const exit = await svc.waitForExit(info.id);
    expect(exit.code).toBe(0);
    expect(counts.pause).toBeGreaterThan(0);
  });

  it('attach replays the scrollback, capped, and the live stream continues after it', async () => {
    const { svc, data } = makeService({ scrollbackBytes: 1000 });
    const info = svc.register({ kind: 'host', title: 'sh', cols: 80, rows: 24, source: ptyCommand('seq 1 1000; read x; echo "got $x"') });
    await waitFor(() => Buffer.from(svc.attach(info.id).scrollback, 'base64').toString().includes('1000\r\n'));
    const sb = Buffer.from(svc.attach(info.id).scrollback, 'base64');
    expect(sb.length).toBeLessThanOrEqual(1000);
    expect(sb.toString().endsWith('999\r\n1000\r\n')).toBe(true);
    const before = data.length;
    svc.write(info.id, 'abc\r');
    await svc.waitForExit(info.id);
    const after = Buffer.concat(data.slice(before).map((d) => Buffer.from(d.data))).toString();
    expect(after).toContain('got abc');
    expect(() => svc.write(info.id, 'x')).toThrow(/exited/);
  });

  it('resize reaches the pty (stty size)', async () => {
    const { svc, bytesOf } = makeService();
    const info = svc.register({ kind: 'host', title: 'sh', cols: 80, rows: 24, source: ptyCommand('read x; stty size') });
    await new Promise((r) => setTimeout(r, 100));
    svc.resize(info.id, 132, 43);
    svc.write(info.id, '\r');
    await svc.waitForExit(info.id);
    expect(bytesOf(info.id).toString()).toContain('43 132');
    expect(svc.list()[0]).toMatchObject({ cols: 132, rows: 43 });
    expect(() => svc.resize(info.id, 0, 10)).toThrow(/out of range/);
  });

  it('close kills a running source and reports it', async () => {
    const { svc } = makeService();
    const info = svc.register({ kind: 'host', title: 'sleep', cols: 80, rows: 24, source: ptyCommand('sleep 60') });
    svc.close(info.id);
    const exit = await svc.waitForExit(info.id);
    expect(exit).toEqual({ code: null, lost: false });
  });

  it('unknown sessions and bad acks get clear errors', () => {
    const { svc } = makeService();
    expect(() => svc.attach('nope')).toThrow(/no terminal session "nope"/);
    const info = svc.register({ kind: 'host', title: 'sh', cols: 80, rows: 24, source: ptyCommand('sleep 5') });
    expect(() => svc.ack(info.id, -4)).toThrow(/not a byte count/);
    svc.close(info.id);
  });

  it('a persisted log is listed and replayed by a new service after a restart', async () => {
    const first = makeService();
    const stage = first.svc.register({ taskId: 'task-1', kind: 'stage', title: 'build', cols: 80, rows: 24, source: ptyCommand('echo building; echo "done ✓"; read _end; exit 2'), persistLog: true });
    const running = first.svc.register({ taskId: 'task-1', kind: 'stage', title: 'test', cols: 80, rows: 24, source: ptyCommand('echo started; sleep 60'), persistLog: true });
    const notPersisted = first.svc.register({ kind: 'host', title: 'sh', cols: 80, rows: 24, source: ptyCommand('echo hi') });
    await releaseWhenSeen(first.svc, stage.id, () => first.bytesOf(stage.id), '✓\r\n');
    await first.svc.waitForExit(notPersisted.id);
    await waitFor(() => first.svc.tail(running.id, 100).includes('started'));
    await first.svc.dispose(); // the app quits while 'test' runs

    const second = makeService();
    const listed = second.svc.list('task-1');
    expect(listed.map((i) => i.id)).toEqual([stage.id, running.id]);
    expect(listed[0]).toMatchObject({ title: 'build', status: 'exited', exitCode: 2, taskId: 'task-1' });
    expect(listed[1]).toMatchObject({ title: 'test', status: 'lost' });
    expect(second.svc.list().some((i) => i.id === notPersisted.id)).toBe(false);
    const replay = Buffer.from(second.svc.attach(stage.id).scrollback, 'base64').toString('utf8');
    expect(replay).toMatch(/^building\r\ndone ✓\r\n(\r\n)?$/);
    expect(second.svc.tail(running.id, 100)).toBe('started\n');
    expect(await second.svc.waitForExit(stage.id)).toEqual({ code: 2, lost: false });
    expect(() => second.svc.write(stage.id, 'x')).toThrow(/exited/);
    await second.svc.remove(stage.id);
    expect(fs.existsSync(path.join(dir, 'logs', `${stage.id}.log`))).toBe(false);
  });

  it('rotates a persisted log at its cap and still replays the tail across both files', async () => {
    const { svc, bytesOf } = makeService({ maxLogBytes: 10_000, scrollbackBytes: 15_000, batch: { delayMs: 1, maxChunkBytes: 1000 } });
    const info = svc.register({ kind: 'stage', title: 'big', cols: 80, rows: 24, source: ptyCommandHeld('seq 1 10000'), persistLog: true });
    await releaseWhenSeen(svc, info.id, () => bytesOf(info.id), '\n10000\r\n');
    await svc.dispose();
    const files = fs.readdirSync(path.join(dir, 'logs')).sort();
    expect(files).toEqual([`${info.id}.json`, `${info.id}.log`, `${info.id}.log.1`]);
    for (const f of files) expect(fs.statSync(path.join(dir, 'logs', f)).size).toBeLessThanOrEqual(10_000);
    const again = makeService({ scrollbackBytes: 15_000 });
    const replay = Buffer.from(again.svc.attach(info.id).scrollback, 'base64').toString();
    expect(replay.length).toBeGreaterThan(10_000);
    expect(replay).toMatch(/\n9999\r\n10000\r\n(\r\n)?$/);
  });

  it('keeps the terminal when its log cannot be written, and says why', async () => {
    const { svc, bytesOf, warnings } = makeService();
    // The log folder vanished and a file took its place: every log write fails.
    fs.rmSync(path.join(dir, 'logs'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'logs'), 'not a folder');
    const info = svc.register({ kind: 'stage', title: 'x', cols: 80, rows: 24, source: ptyCommandHeld('echo still-here'), persistLog: true });
    await releaseWhenSeen(svc, info.id, () => bytesOf(info.id), 'still-here\r\n');
    expect(svc.list()[0]).toMatchObject({ status: 'exited', exitCode: 0 });
    expect(svc.tail(info.id, 100)).toContain('still-here');
    await svc.logSettled(info.id);
    expect(warnings.join('\n')).toMatch(new RegExp(`terminal ${info.id}: terminal log: .*ENOTDIR`));
  });

  it('ignores corrupt metadata in the log folder', () => {
    fs.mkdirSync(path.join(dir, 'logs'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'logs', 'term-x.json'), '{"version":1,"info":{"id":"term-x"}}');
    fs.writeFileSync(path.join(dir, 'logs', 'bad name!.json'), '{}');
    const { svc, warnings } = makeService();
    expect(svc.list()).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/unreadable terminal log metadata term-x\.json/)]);
  });
});

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
