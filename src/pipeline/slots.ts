/** At most `limit` holders at once; the others wait their turn in arrival order. */
export class Slots {
  private held = 0;
  private readonly queue: (() => void)[] = [];
  private readonly limit: number;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Resolves with a release function once a slot is free; call it exactly once. */
  async acquire(): Promise<() => void> {
    if (this.held < this.limit) this.held++;
    else await new Promise<void>((resolve) => this.queue.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.queue.shift();
      // the slot passes straight to the next waiter: `held` stays the same
      if (next) next();
      else this.held--;
    };
  }

  get inUse(): number {
    return this.held;
  }

  get waiting(): number {
    return this.queue.length;
  }
}
