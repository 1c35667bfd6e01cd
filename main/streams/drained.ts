// Waiting out a writable stream's backpressure. `drain` never comes to a stream
// that closed (its reader died, it was destroyed): waiting on `drain` alone
// hangs there, and a `close` listener added per wait and left behind piles up
// on a long copy (Node warns past ten).
interface Drainable {
  once(event: 'drain' | 'close', listener: () => void): unknown;
  off(event: 'drain' | 'close', listener: () => void): unknown;
}

/** Resolves on the stream's next `drain` or its `close`, whichever comes first, leaving no listener behind. */
export function drainedOrClosed(stream: Drainable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('close', done);
      resolve();
    };
    stream.once('drain', done);
    stream.once('close', done);
  });
}
