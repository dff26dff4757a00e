import { systemClock, type Clock } from './clock.ts';

/**
 * A small time-bounded cache of loads in flight or done: the hot paths read the same device, type or webhook thousands
 * of times a second, and a change becomes visible within `ttlMs`. Concurrent callers share one load; a failed load is
 * forgotten at once; beyond `maxEntries` the oldest entry goes.
 */
export class TtlCache<V> {
  readonly #map = new Map<string, { at: number; value: Promise<V> }>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #clock: Clock;

  constructor(ttlMs: number, maxEntries = 50_000, clock: Clock = systemClock) {
    this.#ttlMs = ttlMs;
    this.#maxEntries = maxEntries;
    this.#clock = clock;
  }

  get(key: string, load: () => Promise<V>): Promise<V> {
    const now = this.#clock.now();
    const hit = this.#map.get(key);
    if (hit && now - hit.at < this.#ttlMs) return hit.value;
    const value = load();
    this.#map.set(key, { at: now, value });
    value.catch(() => this.#map.delete(key));
    if (this.#map.size > this.#maxEntries) this.#map.delete(this.#map.keys().next().value as string);
    return value;
  }

  delete(key: string): void {
    this.#map.delete(key);
  }
}
