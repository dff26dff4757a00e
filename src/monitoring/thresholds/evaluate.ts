import type { Logger } from '../../app/logger.ts';
import { namedStatement, type Queryable } from '../../app/db.ts';
import { isTransient } from '../../app/transient.ts';
import type { ConditionReportIn } from '../reports/store.ts';
import { belowLow, levelOf, type Level, type ValuePair } from './limits.ts';
import type { ThresholdCache } from './cache.ts';

/** What a batch says about one (pin, quantity) pair, in time order of its measurements. */
interface PairSummary {
  pinId: number;
  /** the device link the measurements came through; null for a manual report (entered on its pin group) */
  linkId: number | null;
  quantityHashId: string;
  maxLevel: Level;
  /** which side the worst measurement lay on */
  side: 'low' | 'high';
  lastLevel: Level;
  lastValue: ValuePair;
  lastAt: string;
  firstCrossingAt: string | null;
  crossings: number;
  count: number;
  /** in-range measurements after the last crossing of the batch (all of them without one) */
  inRangeTail: number;
  inRangeSince: string | null;
  autoClose: boolean;
  closeAmount: number;
  closeSeconds: number | null;
  /** counts for an issue that was open: written later, they never open a new issue (it may have been closed meanwhile) */
  updateOnly: boolean;
}

// one statement per batch: each pair's open issue is found by its cause (index), updated and closed
// when the environment lets issues close themselves; a crossing without an open issue opens one; a
// measurement not newer than what an issue saw last (a batch stored twice) changes nothing
const UPSERT_ISSUES = namedStatement(
  'threshold-issues',
  `WITH input AS (
    SELECT x.*, p.environment_id, p.pin_group_id, p.name AS pin_name, q.id AS quantity_id, q.name_text AS quantity_name, k.cause, o.id AS open_id
      FROM json_to_recordset($1::json) AS x("pinId" bigint, "linkId" bigint, "quantityHashId" text, "maxLevel" smallint, side text,
           "lastLevel" smallint, "lastValue" jsonb, "lastAt" timestamptz, "firstCrossingAt" timestamptz, crossings int, count int,
           "inRangeTail" int, "inRangeSince" timestamptz, "autoClose" boolean, "closeAmount" int, "closeSeconds" int, "updateOnly" boolean)
      JOIN pin p ON p.id = x."pinId"
      JOIN quantity q ON q.hash_id = x."quantityHashId"
      CROSS JOIN LATERAL (SELECT concat('threshold:', x."pinId", ':', q.id) AS cause) k
      LEFT JOIN LATERAL (SELECT oi.id FROM issue oi WHERE oi.cause = k.cause AND oi.closed_at IS NULL AND oi.deleted_at IS NULL) o ON true
     -- a device's measurement counts while its channel is still mapped to the pin; a manual one has no channel
     WHERE x."linkId" IS NULL OR EXISTS (SELECT 1 FROM device_link_channel c WHERE c.link_id = x."linkId" AND c.pin_id = x."pinId")
  ), upd AS (
    UPDATE issue i SET
      level = GREATEST(i.level, s."maxLevel"),
      last_value = s."lastValue", last_level = s."lastLevel", last_measured_at = s."lastAt",
      crossing_count = i.crossing_count + s.crossings, measurement_count = i.measurement_count + s.count,
      in_range_count = CASE WHEN s.crossings > 0 THEN s."inRangeTail" ELSE i.in_range_count + s."inRangeTail" END,
      in_range_since = CASE WHEN s."inRangeTail" = 0 THEN NULL WHEN s.crossings > 0 OR i.in_range_since IS NULL THEN s."inRangeSince" ELSE i.in_range_since END,
      closed_at = CASE WHEN s."autoClose" AND s."lastLevel" = 0 AND CASE
          WHEN s."closeSeconds" IS NULL THEN (CASE WHEN s.crossings > 0 THEN s."inRangeTail" ELSE i.in_range_count + s."inRangeTail" END) >= s."closeAmount"
          ELSE (CASE WHEN s.crossings > 0 OR i.in_range_since IS NULL THEN s."inRangeSince" ELSE i.in_range_since END)
               <= s."lastAt" - make_interval(secs => s."closeAmount"::float8 * s."closeSeconds") END
        THEN now() END,
      updated_at = now()
      FROM input s
     WHERE i.id = s.open_id AND s."lastAt" > coalesce(i.last_measured_at, '-infinity')
    RETURNING i.id, i.cause, i.closed_at, i.level
  ), ins AS (
    INSERT INTO issue (hash_id, environment_id, pin_group_id, pin_ids, title, level, automation, quantity_ids, cause, last_value, last_level,
                       last_measured_at, crossing_count, measurement_count, in_range_count, in_range_since, start_at, closed_at)
    SELECT substr(md5(gen_random_uuid()::text), 1, 12), s.environment_id, s.pin_group_id, ARRAY[s."pinId"],
           left(concat(s.quantity_name, CASE WHEN s."maxLevel" = 2 THEN ' critically ' ELSE ' too ' END, s.side, ' on ', s.pin_name), 100),
           s."maxLevel", '{"type": "thresholds"}', ARRAY[s.quantity_id], s.cause, s."lastValue", s."lastLevel", s."lastAt", s.crossings, s.count,
           s."inRangeTail", s."inRangeSince", s."firstCrossingAt",
           CASE WHEN s."autoClose" AND s."lastLevel" = 0 AND CASE WHEN s."closeSeconds" IS NULL THEN s."inRangeTail" >= s."closeAmount"
             ELSE s."inRangeSince" <= s."lastAt" - make_interval(secs => s."closeAmount"::float8 * s."closeSeconds") END THEN now() END
      FROM input s
     WHERE s."maxLevel" > 0 AND s.open_id IS NULL AND NOT s."updateOnly"
    ON CONFLICT (cause) WHERE cause IS NOT NULL AND closed_at IS NULL AND deleted_at IS NULL DO NOTHING
    RETURNING id, cause, closed_at, level
  ), closed AS (
    INSERT INTO issue_comment (hash_id, issue_id, comment)
    SELECT substr(md5(gen_random_uuid()::text), 1, 12), c.id, 'Closed automatically: the measurements are back within the thresholds'
      FROM (SELECT id, closed_at FROM upd UNION ALL SELECT id, closed_at FROM ins) c WHERE c.closed_at IS NOT NULL
  )
  SELECT s."pinId" AS pin_id, s."quantityHashId" AS quantity_hash_id, c.closed_at IS NULL AS open, c.level
    FROM (SELECT cause, closed_at, level FROM upd UNION ALL SELECT cause, closed_at, level FROM ins) c JOIN input s ON s.cause = c.cause`,
);

type Item = { level: Level; side: 'low' | 'high'; value: ValuePair; at: string; t: number };

/** `a` then `b` (measured later) as one summary of the pair. */
function merge(a: PairSummary, b: PairSummary): PairSummary {
  const [first, last] = Date.parse(a.lastAt) <= Date.parse(b.lastAt) ? [a, b] : [b, a];
  return {
    ...last,
    maxLevel: Math.max(first.maxLevel, last.maxLevel) as Level,
    side: last.maxLevel > first.maxLevel ? last.side : first.side,
    firstCrossingAt: first.firstCrossingAt ?? last.firstCrossingAt,
    crossings: first.crossings + last.crossings,
    count: first.count + last.count,
    inRangeTail: last.crossings > 0 ? last.inRangeTail : first.inRangeTail + last.inRangeTail,
    inRangeSince: last.crossings > 0 || first.inRangeTail === 0 ? last.inRangeSince : first.inRangeSince,
  };
}

/** The summary of one pair's measurements, in time order. */
function summarise(s: PairSummary, items: Item[]): PairSummary {
  if (items.length > 1) items.sort((a, b) => a.t - b.t);
  for (const it of items) {
    s.count++;
    if (it.level > 0) {
      s.crossings++;
      s.firstCrossingAt ??= it.at;
      s.inRangeTail = 0;
      s.inRangeSince = null;
      if (it.level > s.maxLevel) {
        s.maxLevel = it.level;
        s.side = it.side;
      }
    } else {
      if (s.inRangeTail === 0) s.inRangeSince = it.at;
      s.inRangeTail++;
    }
  }
  const last = items[items.length - 1];
  s.lastLevel = last.level;
  s.lastValue = last.value;
  s.lastAt = last.at;
  return s;
}

/** How long the counts and last value of an open issue may wait in memory before they are written. */
export const COALESCE_MS = 1000;

/**
 * Threshold evaluation of stored batches. Every measurement that landed on a pin is checked against
 * the pin's thresholds (or its quantity's defaults) held in memory (ThresholdCache). What changes an
 * issue's state is written with the batch, in one statement: a crossing with no open issue opens one,
 * a worse level raises it, an in-range value may close it (when the environment allows). What only
 * moves an open issue's counts and last value is merged in memory per pair and written at most
 * COALESCE_MS later (with the next statement or by a timer): a pin whose issue stays open does not
 * cost a statement per batch. A process that dies loses at most that window of counts.
 */
export class ThresholdEvaluator {
  readonly #pending = new Map<string, PairSummary>();
  readonly #timer: NodeJS.Timeout;
  #flushing: Promise<void> = Promise.resolve();

  private readonly db: Queryable;
  private readonly log: Logger | null;
  private readonly cache: ThresholdCache;

  constructor(db: Queryable, log: Logger | null, cache: ThresholdCache, coalesceMs = COALESCE_MS) {
    this.db = db;
    this.log = log;
    this.cache = cache;
    this.#timer = setInterval(() => {
      if (this.#pending.size > 0) void this.flush().catch(() => undefined);
    }, coalesceMs);
    this.#timer.unref();
  }

  /** Evaluates a stored batch; resolves once what changes an issue's state is written. Returns the pairs written now. */
  async evaluate(reports: ConditionReportIn[]): Promise<number> {
    const cache = this.cache;
    const pinIds = new Set<number>();
    const quantities = new Set<string>();
    for (const r of reports) {
      if (!r.linkId && !r.manual) continue;
      for (const m of r.measurements) {
        if (m.pinId == null || m.unchecked) continue;
        pinIds.add(m.pinId);
        quantities.add(m.quantityHashId);
      }
    }
    if (pinIds.size === 0) return 0;
    await cache.load(this.db, pinIds, quantities);
    const pairs = new Map<string, { summary: PairSummary; items: Item[] }>();
    for (const r of reports) {
      if (!r.linkId && !r.manual) continue;
      for (const m of r.measurements) {
        if (m.pinId == null || m.unchecked) continue;
        const pin = cache.pin(m.pinId);
        if (!pin) continue;
        const limits = pin.limits.get(m.quantityHashId) ?? cache.defaults(m.quantityHashId);
        if (!limits && !pin.open.has(m.quantityHashId)) continue;
        const value = { orderOfMagnitude: m.orderOfMagnitude, significand: m.significand };
        const key = `${m.pinId}:${m.quantityHashId}`;
        let pair = pairs.get(key);
        if (!pair) {
          pair = {
            items: [],
            summary: {
              pinId: m.pinId,
              linkId: r.linkId ?? null,
              quantityHashId: m.quantityHashId,
              maxLevel: 0,
              side: 'high',
              lastLevel: 0,
              lastValue: value,
              lastAt: m.generatedAt,
              firstCrossingAt: null,
              crossings: 0,
              count: 0,
              inRangeTail: 0,
              inRangeSince: null,
              autoClose: pin.autoClose.allowed,
              closeAmount: pin.autoClose.amount,
              closeSeconds: pin.autoClose.unitSeconds,
              updateOnly: false,
            },
          };
          pairs.set(key, pair);
        }
        pair.items.push({
          level: limits ? levelOf(limits, value) : 0,
          side: limits && belowLow(limits, value) ? 'low' : 'high',
          value,
          at: m.generatedAt,
          t: Date.parse(m.generatedAt),
        });
      }
    }
    const now: PairSummary[] = [];
    for (const [key, { summary, items }] of pairs) {
      const s = summarise(summary, items);
      const openLevel = cache.pin(s.pinId)?.open.get(s.quantityHashId);
      if (openLevel === undefined) {
        if (s.maxLevel > 0) now.push(this.#take(key, s));
      } else if (s.maxLevel > openLevel || (s.autoClose && s.lastLevel === 0)) {
        now.push(this.#take(key, s));
      } else {
        s.updateOnly = true;
        const waiting = this.#pending.get(key);
        this.#pending.set(key, waiting ? merge(waiting, s) : s);
      }
    }
    if (now.length === 0) return 0;
    // what waits goes along: the statement runs anyway
    await this.#write([...now, ...this.#drain()]);
    return now.length;
  }

  /** Writes what waits in memory. */
  flush(): Promise<void> {
    const run = this.#flushing.then(() => (this.#pending.size > 0 ? this.#write(this.#drain()) : undefined));
    this.#flushing = run.catch((err: Error) => this.log?.warn({ err: err.message }, 'threshold issue counts could not be written; they are tried again'));
    return run;
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush().catch(() => undefined);
  }

  /** `s` with what waits for the same pair merged in front of it. */
  #take(key: string, s: PairSummary): PairSummary {
    const waiting = this.#pending.get(key);
    this.#pending.delete(key);
    return waiting ? merge(waiting, s) : s;
  }

  #drain(): PairSummary[] {
    const all = [...this.#pending.values()];
    this.#pending.clear();
    return all;
  }

  async #write(input: PairSummary[]): Promise<void> {
    let rows: { pin_id: number; quantity_hash_id: string; open: boolean; level: number }[];
    try {
      ({ rows } = await this.db.query<{ pin_id: number; quantity_hash_id: string; open: boolean; level: number }>(UPSERT_ISSUES, [JSON.stringify(input)]));
    } catch (err) {
      // nothing of the statement happened: the summaries wait again, merged before anything newer
      for (const s of input) {
        const key = `${s.pinId}:${s.quantityHashId}`;
        const newer = this.#pending.get(key);
        this.#pending.set(key, newer ? merge(s, newer) : s);
      }
      throw err;
    }
    for (const r of rows) {
      const pin = this.cache.pin(r.pin_id);
      if (!pin) continue;
      if (r.open) pin.open.set(r.quantity_hash_id, r.level);
      else pin.open.delete(r.quantity_hash_id);
    }
  }
}

/**
 * The worker's evaluation of each stored batch. A store that is away fails the batch (it is stored
 * again, idempotently, and evaluated again: an issue ignores measurements it already saw); any other
 * failure is logged and the reports stay stored.
 */
export function thresholdEvaluation(evaluator: ThresholdEvaluator, log: Logger): (reports: ConditionReportIn[]) => Promise<void> {
  return async (reports) => {
    try {
      await evaluator.evaluate(reports);
    } catch (err) {
      if (isTransient(err)) throw err;
      log.error({ err: (err as Error).message }, 'threshold evaluation of a batch failed; its reports are stored');
    }
  };
}
