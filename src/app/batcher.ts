import { systemClock, type Clock, type ClockTimer } from './clock.ts';

/**
 * Group commit: callers add items and await; items that arrive together are written in one
 * flush (one SQL statement, one HTTP request). A caller's promise settles when its own batch
 * is stored, so an acknowledged item is never only in memory.
 */
export class Batcher<T> {
  private pending: { item: T; resolve: () => void; reject: (err: unknown) => void }[] = [];
  private timer: ClockTimer | null = null;
  private inFlight = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly flushFn: (items: T[]) => Promise<void>;
  private readonly maxItems: number;
  private readonly maxDelayMs: number;
  private readonly maxConcurrentFlushes: number;
  private readonly splitOn: (err: unknown) => boolean;
  private readonly clock: Clock;

  /**
   * `splitOn`: when a flush of several items fails with an error it accepts, each item is flushed on its own,
   * so one item the store refuses fails alone and the others are stored. `clock` times `maxDelayMs`.
   */
  constructor(
    flushFn: (items: T[]) => Promise<void>,
    opts: { maxItems?: number; maxDelayMs?: number; maxConcurrentFlushes?: number; splitOn?: (err: unknown) => boolean; clock?: Clock } = {},
  ) {
    this.flushFn = flushFn;
    this.splitOn = opts.splitOn ?? (() => false);
    this.maxItems = opts.maxItems ?? 200;
    this.maxDelayMs = opts.maxDelayMs ?? 5;
    this.maxConcurrentFlushes = opts.maxConcurrentFlushes ?? 2;
    this.clock = opts.clock ?? systemClock;
  }

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (this.pending.length >= this.maxItems) this.kick();
      else if (!this.timer) this.timer = this.clock.setTimeout(() => this.kick(), this.maxDelayMs);
    });
  }

  private kick(): void {
    if (this.timer) {
      this.clock.clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.pending.length === 0 || this.inFlight >= this.maxConcurrentFlushes) return;
    const batch = this.pending.splice(0, this.maxItems);
    this.inFlight++;
    this.flushFn(batch.map((b) => b.item))
      .then(
        () => batch.forEach((b) => b.resolve()),
        async (err) => {
          if (batch.length === 1 || !this.splitOn(err)) {
            batch.forEach((b) => b.reject(err));
            return;
          }
          await Promise.all(batch.map((b) => this.flushFn([b.item]).then(b.resolve, b.reject)));
        },
      )
      .finally(() => {
        this.inFlight--;
        if (this.pending.length > 0) this.kick();
        else if (this.inFlight === 0) this.idleWaiters.splice(0).forEach((w) => w());
      });
  }

  /** Resolves once everything added so far is flushed. */
  async drain(): Promise<void> {
    if (this.pending.length > 0) this.kick();
    if (this.pending.length === 0 && this.inFlight === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }
}
