/** At most `limit` holders at once; the others wait their turn in arrival order. */
export class Slots {
  private held = 0;
  private readonly queue: (() => void)[] = [];
  private readonly limit: number;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Resolves with a release function once a slot is free; a second call of it does nothing (the worker releases early, once only writes remain, and again in `finally`). */
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

/**
 * `Slots` per key: at most `limit` holders of each key at once, and a key's waiters wait for that key only.
 * The worker keys device requests by supplier (environment): one supplier's slow code fills its own slots,
 * never another's.
 */
export class KeyedSlots {
  private readonly byKey = new Map<string, Slots>();
  private readonly limit: number;

  constructor(limit: number) {
    this.limit = limit;
  }

  async acquire(key: string): Promise<() => void> {
    let slots = this.byKey.get(key);
    if (!slots) {
      slots = new Slots(this.limit);
      this.byKey.set(key, slots);
    }
    const release = await slots.acquire();
    const of = slots;
    return () => {
      release();
      // an idle key is forgotten: a worker serving many suppliers keeps no state for the quiet ones
      if (of.inUse === 0 && of.waiting === 0 && this.byKey.get(key) === of) this.byKey.delete(key);
    };
  }

  /** Holders of `key` now. */
  inUse(key: string): number {
    return this.byKey.get(key)?.inUse ?? 0;
  }
}
