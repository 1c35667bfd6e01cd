// Waiting out backpressure on a real Writable: the wait ends on drain, and on a
// stream destroyed while full (no drain ever comes), and leaves no listener.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { drainedOrClosed } from '../../../main/streams/drained.js';

function slowSink(): { sink: Writable; release: () => void } {
  let pending: (() => void) | undefined;
  const sink = new Writable({
    highWaterMark: 4,
    write(_chunk, _enc, cb) {
      pending = cb;
    },
  });
  return { sink, release: () => pending?.() };
}

describe('drainedOrClosed', () => {
  it('ends on drain, and a thousand waits leave no listener behind', async () => {
    const { sink, release } = slowSink();
    const before = { drain: sink.listenerCount('drain'), close: sink.listenerCount('close') };
    for (let i = 0; i < 1000; i++) {
      expect(sink.write(Buffer.alloc(8))).toBe(false);
      const waited = drainedOrClosed(sink);
      release();
      await waited;
    }
    expect({ drain: sink.listenerCount('drain'), close: sink.listenerCount('close') }).toEqual(before);
  });

  it('ends when the stream is destroyed while full, where drain never comes', async () => {
    const { sink } = slowSink();
    sink.on('error', () => undefined);
    expect(sink.write(Buffer.alloc(8))).toBe(false);
    const waited = drainedOrClosed(sink);
    sink.destroy(new Error('the reader went away'));
    await expect(waited).resolves.toBeUndefined();
    expect(sink.listenerCount('drain')).toBe(0);
  });
});
