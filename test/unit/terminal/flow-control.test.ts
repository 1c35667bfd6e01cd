import { describe, expect, it } from 'vitest';
import {
  FlowController,
  OutputBatcher,
  ScrollbackBuffer,
  terminalBytesToText,
  utf8BoundaryFrom,
} from '../../../main/terminal/flow-control.js';

describe('FlowController', () => {
  it('does nothing until a viewer is attached (a stage with no open tab never stalls)', () => {
    const f = new FlowController({ high: 100, low: 10 });
    expect(f.sent(10_000)).toBeNull();
    expect(f.isPaused).toBe(false);
    expect(f.unacknowledged).toBe(0);
  });

  it('pauses above the high watermark and resumes at the low one', () => {
    const f = new FlowController({ high: 100, low: 10 });
    f.engage();
    expect(f.sent(60)).toBeNull();
    expect(f.sent(40)).toBeNull(); // exactly at high: not above
    expect(f.sent(1)).toBe('pause');
    expect(f.sent(50)).toBeNull(); // already paused, no second decision
    expect(f.unacknowledged).toBe(151);
    expect(f.ack(100)).toBeNull(); // 51 left, above low
    expect(f.isPaused).toBe(true);
    expect(f.ack(41)).toBe('resume'); // 10 left == low
    expect(f.isPaused).toBe(false);
    expect(f.ack(5)).toBeNull();
    expect(f.unacknowledged).toBe(5);
  });

  it('clamps over-acknowledgement at zero and rejects nonsense', () => {
    const f = new FlowController({ high: 100, low: 10 });
    f.engage();
    f.sent(20);
    f.ack(500);
    expect(f.unacknowledged).toBe(0);
    expect(() => f.ack(-1)).toThrow(/not a byte count/);
    expect(() => f.ack(Number.NaN)).toThrow(/not a byte count/);
    expect(() => new FlowController({ high: 10, low: 10 })).toThrow(/invalid watermarks/);
  });

  it('a reattach starts the account from zero and resumes a paused source', () => {
    const f = new FlowController({ high: 100, low: 10 });
    f.engage();
    expect(f.sent(500)).toBe('pause');
    expect(f.engage()).toBe('resume');
    expect(f.unacknowledged).toBe(0);
    expect(f.sent(500)).toBe('pause');
    expect(f.disengage()).toBe('resume');
    expect(f.sent(5000)).toBeNull();
  });
});

describe('OutputBatcher', () => {
  it('arms the timer once per batch and flushes everything in order', () => {
    const b = new OutputBatcher({ delayMs: 5, maxChunkBytes: 100 });
    expect(b.push(Buffer.from('ab'))).toEqual({ ready: [], armTimer: true });
    expect(b.push(Buffer.from('cd'))).toEqual({ ready: [], armTimer: false });
    const out = b.flush();
    expect(Buffer.concat(out).toString()).toBe('abcd');
    expect(out).toHaveLength(1);
    expect(b.flush()).toEqual([]);
    expect(b.push(Buffer.alloc(0)).armTimer).toBe(false);
  });

  it('never emits a chunk above the cap and hands full chunks back at once', () => {
    const b = new OutputBatcher({ delayMs: 5, maxChunkBytes: 10 });
    const r1 = b.push(Buffer.from('0123456'));
    expect(r1.ready).toEqual([]);
    const r2 = b.push(Buffer.from('789abcdefghijklmnopqrstuvwxyz'));
    expect(r2.ready.map(String)).toEqual(['0123456789', 'abcdefghij', 'klmnopqrst']);
    expect(r2.armTimer).toBe(false); // the batch was not empty before
    expect(b.pendingBytes).toBe(6);
    expect(b.flush().map(String)).toEqual(['uvwxyz']);
    // A single huge read is split; the remainder waits for the timer.
    const r3 = b.push(Buffer.alloc(35, 0x41));
    expect(r3.ready.map((c) => c.length)).toEqual([10, 10, 10]);
    expect(r3.armTimer).toBe(true);
    expect(b.flush().map((c) => c.length)).toEqual([5]);
  });

  it('keeps a UTF-8 sequence split across reads and chunks intact end to end', () => {
    const text = 'héllo wörld — 日本語 🎉 '.repeat(50);
    const bytes = Buffer.from(text, 'utf8');
    const b = new OutputBatcher({ delayMs: 5, maxChunkBytes: 7 }); // 7 splits 3- and 4-byte sequences
    const emitted: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += 3) emitted.push(...b.push(bytes.subarray(i, i + 3)).ready);
    emitted.push(...b.flush());
    expect(emitted.some((c) => c.toString('utf8').includes('\ufffd'))).toBe(true); // chunks do split characters
    // A streaming decoder (what xterm.js does with Uint8Array input) joins them.
    const dec = new TextDecoder();
    const joined = emitted.map((c) => dec.decode(c, { stream: true })).join('') + dec.decode();
    expect(joined).toBe(text);
  });
});

describe('OutputBatcher timing', () => {
  const limits = { delayMs: 8, streamDelayMs: 32, streamAfterMs: 100, maxChunkBytes: 1024 };

  it('lets a batch wait longer only once output has kept coming, and goes back after a quiet moment', () => {
    const b = new OutputBatcher(limits);
    // A keystroke's echo after a quiet moment: the short delay.
    expect(b.delayFor(1000)).toBe(8);
    expect(b.flush(1008)).toEqual([]); // nothing pending: nothing went out
    b.push(Buffer.from('x'), 1000);
    b.flush(1008);
    // Output that keeps coming (each batch starts within two stream delays of the last one out).
    let t = 1008;
    const delays: number[] = [];
    while (t < 1300) {
      t += 2;
      b.push(Buffer.from('y'), t);
      const d = b.delayFor(t);
      delays.push(d);
      t += d;
      b.flush(t);
    }
    expect(delays.slice(0, 3)).toEqual([8, 8, 8]);
    expect(delays.at(-1)).toBe(32);
    // The switch comes after streamAfterMs of output, not before.
    const firstLong = delays.indexOf(32);
    expect(firstLong).toBeGreaterThan(0);
    expect(delays.slice(firstLong).every((d) => d === 32)).toBe(true);
    // Quiet for more than two stream delays: the next output is new, short delay again.
    expect(b.delayFor(t + 65)).toBe(8);
  });

  it('a chunk that filled up counts as output going out', () => {
    const b = new OutputBatcher(limits);
    b.delayFor(0);
    for (let t = 0; t <= 120; t += 10) expect(b.push(Buffer.alloc(1024), t).ready).toHaveLength(1);
    expect(b.delayFor(125)).toBe(32);
  });

  it('without a stream delay it behaves as one fixed delay', () => {
    const b = new OutputBatcher({ delayMs: 5, maxChunkBytes: 10 });
    for (let t = 0; t < 500; t += 5) {
      b.push(Buffer.from('z'), t);
      expect(b.delayFor(t)).toBe(5);
      b.flush(t + 5);
    }
  });

  it('refuses a stream delay below the first delay', () => {
    expect(() => new OutputBatcher({ delayMs: 10, streamDelayMs: 5, maxChunkBytes: 10 })).toThrow(/invalid batching/);
    expect(() => new OutputBatcher({ delayMs: -1, maxChunkBytes: 10 })).toThrow(/invalid batching/);
  });
});

describe('ScrollbackBuffer', () => {
  it('keeps the last cap bytes and tracks the stream offset', () => {
    const s = new ScrollbackBuffer(10);
    s.append(Buffer.from('abcdef'));
    s.append(Buffer.from('ghijkl'));
    expect(s.snapshot().toString()).toBe('cdefghijkl');
    expect(s.endOffset).toBe(12);
    s.append(Buffer.from('0123456789ABC'));
    expect(s.snapshot().toString()).toBe('3456789ABC');
    expect(s.byteLength).toBe(10);
    expect(s.tail(4).toString()).toBe('9ABC');
  });

  it('never starts a replay in the middle of a UTF-8 character', () => {
    const s = new ScrollbackBuffer(5);
    s.append(Buffer.from('a日本', 'utf8')); // 7 bytes; cut lands inside 日
    const snap = s.snapshot();
    expect(snap.toString('utf8')).toBe('本');
    expect(utf8BoundaryFrom(Buffer.from('本', 'utf8'), 1)).toBe(3);
  });
});

describe('terminalBytesToText', () => {
  it('strips escape sequences and applies carriage returns', () => {
    const raw = Buffer.from('\x1b[1;32mPASS\x1b[0m ok\r\n\x1b]0;title\x07progress 10%\rprogress 99%\r\ndone\x1b[K\n');
    expect(terminalBytesToText(raw)).toBe('PASS ok\nprogress 99%\ndone\n');
  });
});
