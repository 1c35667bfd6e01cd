// The app log on a real disk: its line format, levels, component names and
// size-based rotation, and what a hostile string (from the guest or a repository)
// can do to it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createFileLogger, formatLine, parseLogLevel, RotatingLogFile } from '../../../main/log/logger.js';

const dirs: string[] = [];
afterEach(() => {
  while (dirs.length) fs.rmSync(dirs.pop()!, { recursive: true, force: true });
});
function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'factory-log-'));
  dirs.push(d);
  return d;
}
const lines = (file: string) => fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);

describe('the app log', () => {
  it('writes one JSON object per line: time, level, component, msg, then the fields', () => {
    const dir = tempDir();
    const log = createFileLogger({ dir, now: () => new Date('2026-01-02T03:04:05.678Z') });
    const err = Object.assign(new Error('EISDIR: illegal operation on a directory'), { code: 'EISDIR' });
    log.child('tasks').warn('saving a stage update failed', { taskId: 'abc12345', err, attempt: 2, skipped: undefined });
    const text = fs.readFileSync(path.join(dir, 'app.log'), 'utf8');
    expect(text).toBe(
      '{"time":"2026-01-02T03:04:05.678Z","level":"warn","component":"tasks","msg":"saving a stage update failed",' +
        '"taskId":"abc12345","err":{"name":"Error","message":"EISDIR: illegal operation on a directory","code":"EISDIR"},"attempt":2}\n',
    );
    expect(fs.statSync(path.join(dir, 'app.log')).mode & 0o777).toBe(0o600);
  });

  it('drops lines below its level, and refuses a level it does not know', () => {
    const dir = tempDir();
    const log = createFileLogger({ dir, level: 'warn' });
    log.debug('d');
    log.info('i');
    log.warn('w');
    log.error('e');
    expect(lines(path.join(dir, 'app.log')).map((l) => l.level)).toEqual(['warn', 'error']);
    const dbg = createFileLogger({ dir: tempDir(), level: 'debug' });
    dbg.debug('seen');
    expect(parseLogLevel(undefined)).toBe('info');
    expect(parseLogLevel('debug')).toBe('debug');
    expect(() => parseLogLevel('verbose')).toThrow('log level "verbose" is not one of debug, info, warn, error');
  });

  it('keeps a line from the guest on one line, and a field cannot pose as time, level or component', () => {
    const dir = tempDir();
    const log = createFileLogger({ dir, now: () => new Date(0) });
    const hostile = 'ok\n{"time":"1999","level":"error","component":"credentials","msg":"forged"}\r\u001b[2J\u0000';
    log.child('pipeline').info(hostile, { level: 'error', component: 'credentials', msg: 'x', time: 'y', detail: hostile });
    const text = fs.readFileSync(path.join(dir, 'app.log'), 'utf8');
    expect(text.split('\n')).toHaveLength(2); // one line and the final newline
    const [line] = lines(path.join(dir, 'app.log'));
    expect(line).toEqual({ time: new Date(0).toISOString(), level: 'info', component: 'pipeline', msg: hostile, detail: hostile });
  });

  it('caps a huge message so one line never takes the log over', () => {
    const line = formatLine(new Date(0), 'warn', 'x', 'a'.repeat(1_000_000), { detail: 'b'.repeat(1_000_000) });
    expect(line.length).toBeLessThan(9_000);
    expect(JSON.parse(line).msg).toMatch(/^a{4000}… \(1000000 chars\)$/);
  });

  it('rotates by size and keeps only the newest files', () => {
    const dir = tempDir();
    const log = createFileLogger({ dir, maxBytes: 400, keep: 2, now: () => new Date(0) });
    for (let i = 0; i < 40; i++) log.info(`line ${String(i).padStart(2, '0')}`, { pad: 'x'.repeat(40) });
    const files = fs.readdirSync(dir).sort();
    expect(files).toEqual(['app.log', 'app.log.1', 'app.log.2']);
    for (const f of files) expect(fs.statSync(path.join(dir, f)).size).toBeLessThanOrEqual(400);
    // Newest in app.log, older in .1, older still in .2; what rotated beyond .2 is gone.
    const msgs = ['app.log.2', 'app.log.1', 'app.log'].flatMap((f) => lines(path.join(dir, f)).map((l) => l.msg as string));
    expect(msgs.at(-1)).toBe('line 39');
    expect(msgs).toEqual([...msgs].sort());
    const n = msgs.map((m) => Number(m.slice(5)));
    expect(n).toEqual(Array.from({ length: n.length }, (_, i) => 40 - n.length + i)); // contiguous, none lost in between
    expect(n.length).toBeLessThan(40);
  });

  it('continues an existing log after a restart and rotates it when it is full', () => {
    const dir = tempDir();
    const file = path.join(dir, 'app.log');
    fs.writeFileSync(file, 'x'.repeat(390) + '\n');
    const log = createFileLogger({ dir, maxBytes: 400, keep: 1 });
    log.warn('after restart');
    expect(fs.readFileSync(path.join(dir, 'app.log.1'), 'utf8')).toBe('x'.repeat(390) + '\n');
    expect(lines(file).map((l) => l.msg)).toEqual(['after restart']);
  });

  it('with keep 0 starts the file over; a line larger than the cap is still written whole', () => {
    const dir = tempDir();
    const sink = new RotatingLogFile({ dir, maxBytes: 50, keep: 0 });
    sink.write('a'.repeat(30) + '\n');
    sink.write('b'.repeat(80) + '\n');
    sink.write('c\n');
    expect(fs.readdirSync(dir)).toEqual(['app.log']);
    expect(fs.readFileSync(sink.file, 'utf8')).toBe('c\n');
    expect(() => new RotatingLogFile({ dir, maxBytes: 0 })).toThrow(/maxBytes > 0/);
    expect(() => new RotatingLogFile({ dir, keep: -1 })).toThrow(/keep >= 0/);
  });

  it('never throws when the log cannot be written (the folder is a file)', () => {
    const dir = tempDir();
    const notADir = path.join(dir, 'logs');
    fs.writeFileSync(notADir, 'a file where the folder should be');
    const log = createFileLogger({ dir: notADir });
    expect(() => log.error('nowhere to go')).not.toThrow();
  });
});
