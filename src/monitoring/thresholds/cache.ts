import type { Changes } from '../../app/changes.ts';
import type { Queryable } from '../../app/db.ts';
import { storedLimit, type Limits } from './limits.ts';

/** How an environment closes threshold issues itself (environment settings allowAutoCloseThresholdIssues, issueAutoClosing*). */
export interface AutoClose {
  allowed: boolean;
  amount: number;
  /** null: `amount` counts in-range measurements; else seconds per unit of `amount` in range */
  unitSeconds: number | null;
}

/** issueAutoClosingTriggerUnitType values: measurements in a row, or a time in range. */
export const AUTO_CLOSE_UNITS: Record<string, number | null> = { measurements: null, seconds: 1, minutes: 60, hours: 3600, days: 86400 };

export function autoCloseOf(settings: Record<string, unknown>): AutoClose {
  const amount = settings.issueAutoClosingTriggerAmount;
  const unit = settings.issueAutoClosingTriggerUnitType;
  return {
    allowed: settings.allowAutoCloseThresholdIssues === true,
    amount: typeof amount === 'number' && amount > 0 ? amount : 1,
    unitSeconds: typeof unit === 'string' && Object.hasOwn(AUTO_CLOSE_UNITS, unit) ? AUTO_CLOSE_UNITS[unit] : null,
  };
}

/** What the report path knows of one pin: its own limits and its open threshold issues, by quantity hashId. */
export interface PinState {
  at: number;
  autoClose: AutoClose;
  limits: Map<string, Limits>;
  /** open threshold issues: quantity hashId → the issue's level */
  open: Map<string, number>;
}

const CACHE_MS = 5000;

const LOAD_PINS = `SELECT p.id, e.settings AS settings,
    (SELECT coalesce(json_agg(json_build_object('q', q.hash_id, 'criticallyLow', t.critically_low, 'low', t.low, 'high', t.high, 'criticallyHigh', t.critically_high)), '[]')
       FROM pin_threshold t JOIN quantity q ON q.id = t.quantity_id WHERE t.pin_id = p.id) AS limits,
    (SELECT coalesce(json_agg(json_build_array(q.hash_id, i.level)), '[]') FROM issue i JOIN quantity q ON q.id = i.quantity_ids[1]
      WHERE i.pin_group_id = p.pin_group_id AND i.cause = concat('threshold:', p.id, ':', q.id) AND i.closed_at IS NULL AND i.deleted_at IS NULL) AS open
  FROM pin p JOIN environment e ON e.id = p.environment_id WHERE p.id = ANY($1::bigint[])`;
const LOAD_QUANTITIES = `SELECT hash_id, default_critically_low_threshold AS cl, default_low_threshold AS l, default_high_threshold AS h,
    default_critically_high_threshold AS ch FROM quantity WHERE hash_id = ANY($1::text[])`;

const limitsOf = (r: Record<string, unknown>): Limits => ({
  criticallyLow: storedLimit(r.criticallyLow),
  low: storedLimit(r.low),
  high: storedLimit(r.high),
  criticallyHigh: storedLimit(r.criticallyHigh),
});

/**
 * Thresholds and open threshold issues of the pins reports land on, kept for CACHE_MS: the report
 * path reads them for every measurement and asks PostgreSQL only for pins and quantities it has not
 * seen lately. What changes them (a threshold set, an issue closed, a quantity's defaults, an environment's
 * settings) publishes a `thresholds` change after its commit (src/app/changes.ts); the composition root has each
 * context's cache forget on it: in the changing process before the change is answered, in every other process as
 * Redis brings it. CACHE_MS bounds what a lost announcement leaves stale.
 */
export class ThresholdCache {
  readonly #pins = new Map<number, PinState>();
  readonly #defaults = new Map<string, { at: number; limits: Limits | null }>();
  #listen: (() => Promise<void>) | null;

  /** `listen` subscribes to other processes' changes (the context's `changes.listen`); called on the first load. */
  constructor(listen: (() => Promise<void>) | null = null) {
    this.#listen = listen;
  }

  /** Loads what is missing or old for these pins and quantities (two queries at most). */
  async load(db: Queryable, pinIds: Iterable<number>, quantityHashIds: Iterable<string>): Promise<void> {
    if (this.#listen) {
      // not awaited: a subscriber waiting for Redis holds no report back (CACHE_MS bounds what it misses)
      this.#listen().catch(() => undefined);
      this.#listen = null;
    }
    const now = Date.now();
    const pins = [...pinIds].filter((id) => now - (this.#pins.get(id)?.at ?? -Infinity) >= CACHE_MS);
    const quantities = [...quantityHashIds].filter((h) => now - (this.#defaults.get(h)?.at ?? -Infinity) >= CACHE_MS);
    const [p, q] = await Promise.all([
      pins.length > 0 ? db.query(LOAD_PINS, [pins]) : null,
      quantities.length > 0 ? db.query(LOAD_QUANTITIES, [quantities]) : null,
    ]);
    if (this.#pins.size > 200_000) this.#pins.clear();
    if (this.#defaults.size > 50_000) this.#defaults.clear();
    for (const id of pins) this.#pins.delete(id);
    for (const r of p?.rows ?? []) {
      this.#pins.set(r.id as number, {
        at: now,
        autoClose: autoCloseOf(r.settings as Record<string, unknown>),
        limits: new Map((r.limits as Record<string, unknown>[]).map((l) => [l.q as string, limitsOf(l)])),
        open: new Map(r.open as [string, number][]),
      });
    }
    for (const r of q?.rows ?? []) {
      const limits = { criticallyLow: storedLimit(r.cl), low: storedLimit(r.l), high: storedLimit(r.h), criticallyHigh: storedLimit(r.ch) };
      const any = limits.criticallyLow || limits.low || limits.high || limits.criticallyHigh;
      this.#defaults.set(r.hash_id as string, { at: now, limits: any ? limits : null });
    }
  }

  pin(id: number): PinState | undefined {
    return this.#pins.get(id);
  }

  /** The quantity's default limits, or null when it has none. */
  defaults(quantityHashId: string): Limits | null {
    return this.#defaults.get(quantityHashId)?.limits ?? null;
  }

  forgetPins(ids: Iterable<number>): void {
    for (const id of ids) this.#pins.delete(id);
  }

  forgetQuantity(hashId: string): void {
    this.#defaults.delete(hashId);
  }

  /** Every pin of an environment whose settings changed: simplest is to forget all. */
  forgetAll(): void {
    this.#pins.clear();
    this.#defaults.clear();
  }

  /** Forgets what a `thresholds` change names; null (changes possibly missed): everything. */
  forget(change: Changes['thresholds'] | null): void {
    if (!change || change.all) {
      this.forgetAll();
      return;
    }
    this.forgetPins(change.pinIds);
    for (const hashId of change.quantityHashIds) this.forgetQuantity(hashId);
  }
}

declare module '../../app/context.ts' {
  interface AppContext {
    /** the report path's thresholds of this context (src/monitoring/thresholds/cache.ts), forgotten on `thresholds` changes */
    thresholds: ThresholdCache;
  }
}
