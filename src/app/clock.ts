/**
 * Time as an input. Whatever waits or expires (TTL caches, the CoAP endpoint's retransmission, exchange lifetime and
 * deduplication, the queue's batching, leases) takes a `Clock`, so that a test drives time with `ManualClock.advance`
 * instead of waiting for the wall clock, and a check that "nothing happened" is made after the deadline has provably
 * passed rather than after a sleep that a slow machine may cut short.
 *
 * The protocol libraries (coap, dtls, tls, sandbox) import nothing of ours above the kernel's types: they
 * `import type { Clock }` from here and keep a three-line default of their own (`systemClock` below, written again
 * beside them), so a caller that passes nothing gets the wall clock and the library still imports no value from the
 * kernel. One interface, several identical trivial defaults: cheaper than a runtime dependency pointing up.
 */

/** What `setTimeout` returns: enough to cancel it and let it not hold the process open. */
export interface ClockTimer {
  unref(): unknown;
}

export interface Clock {
  /** Milliseconds since the epoch (the manual clock starts wherever it is told). */
  now(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer | null | undefined): void;
}

/** The wall clock and Node's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};

interface ManualTimer extends ClockTimer {
  at: number;
  seq: number;
  fn: () => void;
}

/** A clock that moves only when told: `advance(ms)` fires the timers that fall due, in order of their time. */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Set<ManualTimer>();

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    const timer: ManualTimer = { at: this.#now + Math.max(0, ms), seq: this.#seq++, fn, unref: () => timer };
    this.#timers.add(timer);
    return timer;
  }

  clearTimeout(timer: ClockTimer | null | undefined): void {
    if (timer) this.#timers.delete(timer as ManualTimer);
  }

  /** The time the next timer falls due, or null when none is set. */
  get nextAt(): number | null {
    return this.#next()?.at ?? null;
  }

  /** Timers set and not yet fired nor cleared. */
  get pending(): number {
    return this.#timers.size;
  }

  /** Moves time on by `ms`, firing each timer that falls due on the way (a timer a callback sets fires too if due). */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (let t = this.#next(); t && t.at <= end; t = this.#next()) {
      this.#timers.delete(t);
      this.#now = t.at;
      t.fn();
    }
    this.#now = end;
  }

  #next(): ManualTimer | undefined {
    let first: ManualTimer | undefined;
    for (const t of this.#timers) if (!first || t.at < first.at || (t.at === first.at && t.seq < first.seq)) first = t;
    return first;
  }
}
