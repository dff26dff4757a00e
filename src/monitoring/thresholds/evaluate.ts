import type { AppContext } from '../../app/context.ts';
import { namedStatement, type Queryable } from '../../app/db.ts';
import { isTransient } from '../../pipeline/failures.ts';
import type { ConditionReportIn } from '../reports/store.ts';
import { belowLow, levelOf, type Level, type ValuePair } from './limits.ts';
import { thresholdCache, type ThresholdCache } from './cache.ts';

/** What a batch says about one (pin, quantity) pair, in time order of its measurements. */
interface PairSummary {
  pinId: number;
  linkId: number;
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
}

// one statement per batch: the pairs' open issues are updated (and closed when the environment lets
// them close themselves), new crossings open an issue; a measurement not newer than what an issue
// saw last (a batch stored twice) changes nothing
const UPSERT_ISSUES = namedStatement('threshold-issues', `WITH input AS (
    SELECT x.*, p.environment_id, p.pin_group_id, p.name AS pin_name, q.id AS quantity_id, q.name_text AS quantity_name,
           concat('threshold:', x."pinId", ':', q.id) AS cause
      FROM json_to_recordset($1::json) AS x("pinId" bigint, "linkId" bigint, "quantityHashId" text, "maxLevel" smallint, side text,
           "lastLevel" smallint, "lastValue" jsonb, "lastAt" timestamptz, "firstCrossingAt" timestamptz, crossings int, count int,
           "inRangeTail" int, "inRangeSince" timestamptz, "autoClose" boolean, "closeAmount" int, "closeSeconds" int)
      JOIN pin p ON p.id = x."pinId"
      JOIN device_link_channel c ON c.link_id = x."linkId" AND c.pin_id = x."pinId"
      JOIN quantity q ON q.hash_id = x."quantityHashId"
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
     WHERE i.cause = s.cause AND i.closed_at IS NULL AND i.deleted_at IS NULL AND s."lastAt" > coalesce(i.last_measured_at, '-infinity')
    RETURNING i.id, i.cause, i.closed_at
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
     WHERE s."maxLevel" > 0 AND NOT EXISTS (SELECT 1 FROM issue i WHERE i.cause = s.cause AND i.closed_at IS NULL AND i.deleted_at IS NULL)
    ON CONFLICT (cause) WHERE cause IS NOT NULL AND closed_at IS NULL AND deleted_at IS NULL DO NOTHING
    RETURNING id, cause, closed_at
  ), closed AS (
    INSERT INTO issue_comment (hash_id, issue_id, comment)
    SELECT substr(md5(gen_random_uuid()::text), 1, 12), c.id, 'Closed automatically: the measurements are back within the thresholds'
      FROM (SELECT id, closed_at FROM upd UNION ALL SELECT id, closed_at FROM ins) c WHERE c.closed_at IS NOT NULL
  )
  SELECT s."pinId" AS pin_id, s."quantityHashId" AS quantity_hash_id, c.closed_at IS NULL AS open
    FROM (SELECT cause, closed_at FROM upd UNION ALL SELECT cause, closed_at FROM ins) c JOIN input s ON s.cause = c.cause`);

/**
 * Threshold evaluation of a batch of stored reports: every measurement that landed on a pin is
 * checked against the pin's thresholds (or its quantity's defaults) held in memory; only pairs
 * that crossed a limit or have an open issue reach PostgreSQL, in one statement for the batch.
 * Returns the number of pairs written (0: no statement ran).
 */
export async function evaluateThresholds(db: Queryable, reports: ConditionReportIn[], cache: ThresholdCache = thresholdCache): Promise<number> {
  const pinIds = new Set<number>();
  const quantities = new Set<string>();
  for (const r of reports) {
    if (!r.linkId) continue;
    for (const m of r.measurements) {
      if (m.pinId == null) continue;
      pinIds.add(m.pinId);
      quantities.add(m.quantityHashId);
    }
  }
  if (pinIds.size === 0) return 0;
  await cache.load(db, pinIds, quantities);
  const pairs = new Map<string, { summary: PairSummary; items: { level: Level; side: 'low' | 'high'; value: ValuePair; at: string; t: number }[] }>();
  for (const r of reports) {
    if (!r.linkId) continue;
    for (const m of r.measurements) {
      if (m.pinId == null) continue;
      const pin = cache.pin(m.pinId);
      if (!pin) continue;
      const limits = pin.limits.get(m.quantityHashId) ?? cache.defaults(m.quantityHashId);
      const open = pin.open.has(m.quantityHashId);
      if (!limits && !open) continue;
      const value = { orderOfMagnitude: m.orderOfMagnitude, significand: m.significand };
      const level = limits ? levelOf(limits, value) : 0;
      const key = `${m.pinId}:${m.quantityHashId}`;
      let pair = pairs.get(key);
      if (!pair) {
        pair = {
          items: [],
          summary: {
            pinId: m.pinId, linkId: r.linkId, quantityHashId: m.quantityHashId, maxLevel: 0, side: 'high', lastLevel: 0, lastValue: value, lastAt: m.generatedAt,
            firstCrossingAt: null, crossings: 0, count: 0, inRangeTail: 0, inRangeSince: null,
            autoClose: pin.autoClose.allowed, closeAmount: pin.autoClose.amount, closeSeconds: pin.autoClose.unitSeconds,
          },
        };
        pairs.set(key, pair);
      }
      const side = limits && belowLow(limits, value) ? 'low' : 'high';
      pair.items.push({ level, side, value, at: m.generatedAt, t: Date.parse(m.generatedAt) });
    }
  }
  const input: PairSummary[] = [];
  for (const { summary: s, items } of pairs.values()) {
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
    if (s.maxLevel > 0 || cache.pin(s.pinId)?.open.has(s.quantityHashId)) input.push(s);
  }
  if (input.length === 0) return 0;
  const { rows } = await db.query<{ pin_id: number; quantity_hash_id: string; open: boolean }>(UPSERT_ISSUES, [JSON.stringify(input)]);
  for (const r of rows) {
    const pin = cache.pin(r.pin_id);
    if (!pin) continue;
    if (r.open) pin.open.add(r.quantity_hash_id);
    else pin.open.delete(r.quantity_hash_id);
  }
  return input.length;
}

/**
 * The worker's evaluation of each stored batch. A store that is away fails the batch (it is stored
 * again, idempotently, and evaluated again: an issue ignores measurements it already saw); any other
 * failure is logged and the reports stay stored.
 */
export function thresholdEvaluation(ctx: AppContext): (reports: ConditionReportIn[]) => Promise<void> {
  return async (reports) => {
    try {
      await evaluateThresholds(ctx.db.deferred, reports);
    } catch (err) {
      if (isTransient(err)) throw err;
      ctx.log.error({ err: (err as Error).message }, 'threshold evaluation of a batch failed; its reports are stored');
    }
  };
}
