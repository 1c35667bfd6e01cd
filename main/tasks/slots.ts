// A counting semaphore: the parallel-task limit (read on every acquire, so a
// settings change applies to the next task).
import { FactoryError } from '../../common/errors.js';

export class Slots {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: () => number) {}

  async acquire(signal: AbortSignal): Promise<() => void> {
    while (this.active >= this.limit()) {
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        // A cancelled waiter leaves the queue, so a release always wakes a live one.
        const onAbort = () => {
          const i = this.waiting.indexOf(wake);
          if (i >= 0) this.waiting.splice(i, 1);
          resolve();
        };
        this.waiting.push(wake);
        signal.addEventListener('abort', onAbort, { once: true });
      });
      if (signal.aborted) {
        // Woken for a freed slot but cancelled before taking it: the next waiter gets it.
        if (this.active < this.limit()) this.waiting.shift()?.();
        throw new FactoryError('Cancelled', 'the task was cancelled before it started');
      }
    }
    this.active++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active--;
      this.waiting.shift()?.();
    };
  }
}
