// How the TerminalService spaces the messages it sends a viewer: a keystroke's
// echo after a quiet moment goes out at once (within the short delay), a flood
// in few large messages. The clock is vitest's (setTimeout and performance.now
// both faked), so the spacing is exact; the source is a scripted stand-in for a
// pty, because a real one cannot be made to write on an exact schedule.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { TerminalDataEvent } from '../../../common/contract.js';
import { DEFAULT_BATCH } from '../../../main/terminal/flow-control.js';
import { TerminalService } from '../../../main/terminal/terminal-service.js';
import type { TerminalSource } from '../../../main/terminal/types.js';

let dir: string;
let svc: TerminalService | undefined;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'term-batching-'));
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
});
afterEach(async () => {
  vi.useRealTimers();
  await svc?.dispose();
  svc = undefined;
  fs.rmSync(dir, { recursive: true, force: true });
});

function scriptedSource() {
  let listener: ((chunk: Buffer) => void) | undefined;
  const source: TerminalSource = {
    onData: (l) => (listener = l),
    onExit: () => {},
    write: () => {},
    resize: () => {},
    pause: () => {},
    resume: () => {},
    kill: () => {},
  };
  return { source, print: (s: string | Buffer) => listener!(Buffer.from(s)) };
}

describe('TerminalService message spacing', () => {
  it('sends an echo after 8 ms, a long flood in 64 ms batches, and an echo after it at once again', () => {
    const data: TerminalDataEvent[] = [];
    svc = new TerminalService({ logDir: path.join(dir, 'logs'), emit: () => {}, emitData: (e) => data.push(e), options: { batch: DEFAULT_BATCH } });
    const src = scriptedSource();
    const info = svc.register({ kind: 'shell', title: 'sh', cols: 80, rows: 24, source: src.source });
    const t0 = performance.now();

    src.print('l');
    vi.advanceTimersByTime(7);
    expect(data).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(data.map((d) => Buffer.from(d.data).toString())).toEqual(['l']);

    // One second of 1 KiB every 2 ms (what a pty gives a fast `cat`).
    vi.advanceTimersByTime(1000);
    const before = data.length;
    for (let t = 0; t < 1000; t += 2) {
      src.print(Buffer.alloc(1024, 0x61));
      vi.advanceTimersByTime(2);
    }
    vi.advanceTimersByTime(40);
    const flood = data.slice(before);
    expect(flood.reduce((n, d) => n + d.data.byteLength, 0)).toBe(500 * 1024);
    // 100 ms at 8 ms and 900 ms at 64 ms is about 26 messages; 32 ms throughout would be about 31, 8 ms 110 or more.
    expect(flood.length).toBeGreaterThanOrEqual(20);
    expect(flood.length).toBeLessThanOrEqual(29);

    // Quiet, then a keystroke's echo: the short delay again.
    vi.advanceTimersByTime(200);
    const n = data.length;
    src.print('s');
    vi.advanceTimersByTime(8);
    expect(data.length).toBe(n + 1);
    expect(svc.stats(info.id).bytesEmitted).toBe(500 * 1024 + 2);
    expect(performance.now() - t0).toBeGreaterThan(1000); // the clock was the fake one
  });
});
