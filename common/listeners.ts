// A set of listeners: add() returns the unsubscribe function, emit() calls each.
// The one event-fan-out used by the app, the transports and the test hosts.
export class Listeners<T> {
  private readonly set = new Set<(value: T) => void>();

  add(listener: (value: T) => void): () => void {
    this.set.add(listener);
    return () => {
      this.set.delete(listener);
    };
  }

  emit(value: T): void {
    // A copy, so a listener that unsubscribes while being called does not skip another.
    for (const listener of [...this.set]) {
      try {
        listener(value);
      } catch {
        /* one listener's failure (e.g. a closed socket) must not starve the others */
      }
    }
  }

  clear(): void {
    this.set.clear();
  }

  get size(): number {
    return this.set.size;
  }
}
