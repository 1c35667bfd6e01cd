// The pacing of terminal output into xterm.js: a flood becomes few large writes
// (few redraws), a keystroke's echo after a quiet moment goes out at once, and
// nothing is lost, reordered or left unacknowledged.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_PACING, WRITE_PIECE_BYTES, WritePacer, pieces, type WritePacerOptions } from '../../renderer/terminal/write-pacer.js';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

function pacer(opts: Partial<WritePacerOptions> = {}) {
  const writes: string[] = [];
  const pendingParse: Array<() => void> = [];
  let parsed = 0;
  let clock = 1000;
  const p = new WritePacer(
    (data, done) => {
      writes.push(text(data));
      pendingParse.push(done);
    },
    (n) => (parsed += n),
    { intervalMs: 40, floodIntervalMs: 100, floodAfterMs: 1000, maxHeldBytes: 1024, quietMs: 1000, ...opts },
    () => clock,
  );
  return {
    p,
    writes,
    parsedBytes: () => parsed,
    parseAll: () => pendingParse.splice(0).forEach((f) => f()),
    advance: (ms: number) => {
      clock += ms;
      vi.advanceTimersByTime(ms);
    },
  };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe('WritePacer', () => {
  it('writes the first output after a quiet moment at once (a typed key echoes without delay)', () => {
    const t = pacer();
    t.p.push(bytes('l'));
    expect(t.writes).toEqual(['l']);
    t.advance(500);
    t.p.push(bytes('s'));
    expect(t.writes).toEqual(['l', 's']);
  });

  it('holds a flood and writes it as one piece per interval, in order, acknowledged once parsed', () => {
    const t = pacer();
    let sent = '';
    for (let i = 0; i < 100; i++) {
      const piece = `line ${i}\r\n`;
      sent += piece;
      t.p.push(bytes(piece));
      t.advance(2); // 100 messages over 200 ms
    }
    t.advance(40);
    // One write at the start, then at most one per 40 ms.
    expect(t.writes.length).toBeGreaterThan(1);
    expect(t.writes.length).toBeLessThanOrEqual(1 + Math.ceil(200 / 40));
    expect(t.writes.join('')).toBe(sent);
    expect(t.parsedBytes()).toBe(0); // nothing acknowledged before xterm.js parsed it
    t.parseAll();
    expect(t.parsedBytes()).toBe(sent.length);
    expect(t.p.pendingBytes).toBe(0);
  });

  it('a flood that keeps coming is written less often after a second; a quiet moment starts over', () => {
    const t = pacer({ maxHeldBytes: 1 << 30 });
    const writesDuring = (ms: number) => {
      const before = t.writes.length;
      for (let i = 0; i < ms / 2; i++) {
        t.p.push(bytes('x'.repeat(100)));
        t.advance(2);
      }
      return t.writes.length - before;
    };
    const first = writesDuring(1000);
    const second = writesDuring(1000);
    expect(first).toBeGreaterThanOrEqual(20); // every 40 ms
    expect(first).toBeLessThanOrEqual(26);
    expect(second).toBeGreaterThanOrEqual(9); // every 100 ms
    expect(second).toBeLessThanOrEqual(12);
    t.advance(1000);
    const quietAt = t.writes.length;
    t.p.push(bytes('echo'));
    expect(t.writes.length).toBe(quietAt + 1); // at once
    expect(writesDuring(400)).toBeGreaterThanOrEqual(9); // back to every 40 ms
  });

  it('by default a flood that has kept coming for a second redraws twice a second', () => {
    const t = pacer(DEFAULT_PACING);
    const writesDuring = (ms: number) => {
      const before = t.writes.length;
      // 25 KB/s in 2 ms pieces: far below the held-bytes cap, and a flush is one write piece, so only the clock decides.
      for (let i = 0; i < ms / 2; i++) {
        t.p.push(bytes('y'.repeat(50)));
        t.advance(2);
      }
      return t.writes.length - before;
    };
    expect(writesDuring(1000)).toBeGreaterThanOrEqual(20); // every 40 ms at first
    const later = writesDuring(2000);
    expect(later).toBeGreaterThanOrEqual(3);
    expect(later).toBeLessThanOrEqual(5); // every 500 ms
  });

  it('writes what a flood left held once nothing more came for the quiet time, not at the end of the interval', () => {
    const t = pacer({ floodIntervalMs: 500, quietMs: 80, maxHeldBytes: 1 << 30 });
    for (let i = 0; i < 1500 / 20; i++) {
      t.p.push(bytes('z'.repeat(100)));
      t.advance(20); // in flow: a batch every 20 ms is never a quiet moment
    }
    const during = t.writes.length;
    t.p.push(bytes('the last line'));
    t.advance(79);
    expect(t.writes.length).toBe(during);
    t.advance(1);
    expect(t.writes.length).toBe(during + 1);
    expect(t.writes.at(-1)!.endsWith('the last line')).toBe(true);
    expect(t.p.pendingBytes).toBe(0);
  });

  it('a keystroke writes what is held at once, and the answer to it is not held either', () => {
    const t = pacer({ floodIntervalMs: 500, quietMs: 400, maxHeldBytes: 1 << 30 });
    for (let i = 0; i < 1500 / 20; i++) {
      t.p.push(bytes('f'.repeat(100)));
      t.advance(20);
    }
    t.p.push(bytes('held'));
    const before = t.writes.length;
    t.p.userInput(); // Ctrl+C
    expect(t.writes.length).toBe(before + 1);
    expect(t.writes.at(-1)!.endsWith('held')).toBe(true);
    t.advance(5);
    t.p.push(bytes('^C\r\n$ '));
    expect(t.writes.at(-1)).toBe('^C\r\n$ '); // the prompt at once
    t.p.userInput(); // nothing held: no empty write
    expect(t.writes.at(-1)).toBe('^C\r\n$ ');
  });

  it('writes a large held flood as pieces xterm.js can parse between page tasks, in order, each acknowledged', () => {
    const t = pacer({ intervalMs: 1000, floodIntervalMs: 1000, maxHeldBytes: 1 << 30 });
    t.p.push(bytes('start'));
    let sent = '';
    for (let i = 0; i < 40; i++) {
      const piece = String.fromCharCode(97 + (i % 26)).repeat(10_000);
      sent += piece;
      t.p.push(bytes(piece));
    }
    t.p.flush();
    const flood = t.writes.slice(1);
    expect(flood.join('')).toBe(sent);
    expect(flood.length).toBe(Math.ceil(sent.length / WRITE_PIECE_BYTES));
    expect(flood.every((w) => w.length <= WRITE_PIECE_BYTES)).toBe(true);
    t.parseAll();
    expect(t.parsedBytes()).toBe(5 + sent.length);
  });

  it('cuts parts into pieces without losing, reordering or copying more than it must', () => {
    const a = bytes('abcdef');
    const b = bytes('gh');
    const c = bytes('ijklmnopq');
    const out = pieces([a, b, c], 4).map(text);
    expect(out).toEqual(['abcd', 'efgh', 'ijkl', 'mnop', 'q']);
    expect(pieces([a], 100)[0]).toBe(a); // one part that fits is passed as it is
    expect(pieces([], 4)).toEqual([]);
  });

  it('writes at once when the held bytes reach the cap, whatever the time', () => {
    const t = pacer({ intervalMs: 1000, floodIntervalMs: 1000, maxHeldBytes: 100 });
    t.p.push(bytes('a'));
    t.p.push(bytes('b'.repeat(60)));
    expect(t.writes).toEqual(['a']);
    t.p.push(bytes('c'.repeat(60)));
    expect(t.writes).toEqual(['a', 'b'.repeat(60) + 'c'.repeat(60)]);
  });

  it('discard forgets what is held (a re-attach replays it); close ignores later output', () => {
    const t = pacer();
    t.p.push(bytes('first'));
    t.p.push(bytes('held'));
    t.p.discard();
    t.advance(100);
    expect(t.writes).toEqual(['first']);
    t.p.push(bytes('after'));
    expect(t.writes).toEqual(['first', 'after']);
    t.p.close();
    t.p.push(bytes('late'));
    t.advance(100);
    expect(t.writes).toEqual(['first', 'after']);
  });

  it('close reports what was never parsed; callbacks from before a discard no longer count', () => {
    const t = pacer();
    t.p.push(bytes('written'));
    t.p.push(bytes('held'));
    expect(t.p.close()).toBe('written'.length + 'held'.length);
    t.parseAll();
    expect(t.parsedBytes()).toBe(0);

    const u = pacer();
    u.p.push(bytes('old account'));
    u.p.discard();
    u.parseAll();
    expect(u.parsedBytes()).toBe(0);
    u.advance(100);
    u.p.push(bytes('new'));
    u.parseAll();
    expect(u.parsedBytes()).toBe(3);
    expect(u.p.close()).toBe(0);
  });

  it('refuses a pacing that would hold output forever', () => {
    const ok = { intervalMs: 40, floodIntervalMs: 100, floodAfterMs: 1000, maxHeldBytes: 10, quietMs: 80 };
    expect(() => new WritePacer(() => {}, () => {}, { ...ok, maxHeldBytes: 0 })).toThrow(/max held 0 bytes/);
    expect(() => new WritePacer(() => {}, () => {}, { ...ok, intervalMs: Number.NaN })).toThrow(/interval NaN ms/);
    expect(() => new WritePacer(() => {}, () => {}, { ...ok, floodIntervalMs: 10 })).toThrow(/flood interval 10 ms \(not below the interval\)/);
    expect(() => new WritePacer(() => {}, () => {}, { ...ok, quietMs: 0 })).toThrow(/quiet after 0 ms/);
  });
});
