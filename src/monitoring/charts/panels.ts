import type { Db, Queryable } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { nameText, type Name } from '../../app/names.ts';
import { PIN_GROUP_LINK_JOIN, PIN_GROUP_SELECT, toPinGroup, type PinGroup } from '../pin-groups/view.ts';
import { PIN_SELECT, toPin } from '../pins/view.ts';
import { QUANTITY_SELECT, toQuantity, type Quantity } from '../quantities/store.ts';
import { pairKey, pinThresholdOf, type PinThreshold } from './pin-threshold.ts';
import { resolveSeries } from './series.ts';

/**
 * Chart panels: the charts shown for a pin group, grid, edge or pin. `automatic` charts are derived
 * on every read; `manual` ones are what a user saved (table chart_panel), as is `lastMode`.
 *
 * Automatic charts, in this order:
 *  1. for a pin group (or a pin), the charts of the device type of the device linked to it: its
 *     `charts` (series by channelIndex) and each channel's `charts`, each series on the pin the
 *     channel is mapped to (for a pin: only its series); series of unmapped channels or deleted
 *     quantities are left out, and so is a chart left without series;
 *  2. for every quantity measured on the panel's pins and not yet shown on that pin by (1), one chart
 *     titled by the quantity with a series per pin measuring it (pin order; at most
 *     MAX_SERIES_PER_CHART series, more continue in a next chart of the same title).
 * The panel's pins: the pin group's; the pin; a pin grid's pins or a pin group grid's pin groups'
 * pins in grid order; the pins on an edge. At most MAX_PANEL_PINS of them (grids and edges).
 */

export type PanelKind = 'pinGroup' | 'grid' | 'edge' | 'pin';
/** the SDK's series limit of a chart (update-panel) */
export const MAX_SERIES_PER_CHART = 40;
/** manual charts a panel may hold */
export const MAX_MANUAL_CHARTS = 20;
/** pins a grid or edge panel derives automatic charts from */
export const MAX_PANEL_PINS = 200;

const PANEL_COLUMN: Record<PanelKind, string> = { pinGroup: 'pin_group_id', grid: 'grid_id', edge: 'edge_id', pin: 'pin_id' };
const NOUN: Record<PanelKind, string> = { pinGroup: 'pin group', grid: 'grid', edge: 'edge', pin: 'pin' };

/** A chart as stored and derived: series by id. */
interface ChartSpec {
  title: string | null;
  series: { pinId: number; quantityId: number; color: string | null }[];
}

export interface Chart {
  title: string | null;
  series: { quantity: Quantity; pin: ReturnType<typeof toPin>; pinGroup: PinGroup; color: string | null; pinThreshold: PinThreshold | null }[];
}
export interface Panel {
  lastMode: 'manual' | 'automatic';
  charts: { automatic: Chart[]; manual: Chart[] };
}

/** What a panel is about: its object and the pins its automatic charts come from. */
interface Scope {
  id: number;
  pinIds: number[];
  /** the pin group whose linked device's charts apply, and the one pin they are limited to (pin panels) */
  linkPinGroupId: number | null;
  onlyPinId: number | null;
}

/** The scopes of `hashIds` (objects of kind `kind` in the environment) by hashId; unknown ones are absent. */
async function loadScopes(db: Queryable, environmentId: number, kind: PanelKind, hashIds: string[]): Promise<Map<string, Scope>> {
  if (hashIds.length === 0) return new Map();
  const sql: Record<PanelKind, string> = {
    pinGroup: `SELECT pg.id, pg.hash_id, pg.id AS link_pin_group_id, NULL::bigint AS only_pin_id,
                      ARRAY(SELECT p.id FROM pin p WHERE p.pin_group_id = pg.id ORDER BY p.id) AS pin_ids
                 FROM pin_group pg WHERE pg.environment_id = $1 AND pg.hash_id = ANY($2)`,
    pin: `SELECT p.id, p.hash_id, p.pin_group_id AS link_pin_group_id, p.id AS only_pin_id, ARRAY[p.id] AS pin_ids
            FROM pin p WHERE p.environment_id = $1 AND p.hash_id = ANY($2)`,
    grid: `SELECT g.id, g.hash_id, NULL::bigint AS link_pin_group_id, NULL::bigint AS only_pin_id,
                  ARRAY(SELECT x.pin_id FROM (
                          SELECT gm.pin_id, gm.position, gm.pin_id AS pin_order FROM grid_member gm WHERE gm.grid_id = g.id AND gm.pin_id IS NOT NULL
                          UNION ALL
                          SELECT p.id, gm.position, p.id FROM grid_member gm JOIN pin p ON p.pin_group_id = gm.pin_group_id WHERE gm.grid_id = g.id
                        ) x ORDER BY x.position, x.pin_order LIMIT ${MAX_PANEL_PINS}) AS pin_ids
             FROM grid g WHERE g.environment_id = $1 AND g.hash_id = ANY($2)`,
    edge: `SELECT e.id, e.hash_id, NULL::bigint AS link_pin_group_id, NULL::bigint AS only_pin_id,
                  ARRAY(SELECT p.id FROM pin p WHERE p.edge_id = e.id ORDER BY p.id LIMIT ${MAX_PANEL_PINS}) AS pin_ids
             FROM edge e WHERE e.environment_id = $1 AND e.hash_id = ANY($2)`,
  };
  const { rows } = await db.query<{ id: number; hash_id: string; link_pin_group_id: number | null; only_pin_id: number | null; pin_ids: number[] }>(sql[kind], [
    environmentId,
    hashIds,
  ]);
  return new Map(rows.map((r) => [r.hash_id, { id: r.id, pinIds: r.pin_ids.map(Number), linkPinGroupId: r.link_pin_group_id, onlyPinId: r.only_pin_id }]));
}

interface DeviceCharts {
  supplierId: number;
  charts: { title: Name | null; series: { channelIndex: number; quantityHashId: string; color?: string | null }[] }[];
  channels: { charts?: { title: Name | null; series: { quantityHashId: string; color?: string | null }[] }[] }[];
  pinOfChannel: Map<number, number>;
}

/** The chart definitions of the device type of the device linked to each of `pinGroupIds`, with its channel mapping. */
async function deviceChartsOf(db: Queryable, pinGroupIds: number[]): Promise<Map<number, DeviceCharts>> {
  if (pinGroupIds.length === 0) return new Map();
  const { rows } = await db.query(
    `SELECT l.pin_group_id, d.environment_id AS supplier_id, t.charts, t.channels,
            ARRAY(SELECT ARRAY[c.channel::bigint, c.pin_id] FROM device_link_channel c WHERE c.link_id = l.id) AS mapping
       FROM device_link l JOIN device d ON d.id = l.device_id JOIN device_type t ON t.id = d.device_type_id AND t.deleted_at IS NULL
      WHERE l.pin_group_id = ANY($1)`,
    [pinGroupIds],
  );
  return new Map(
    rows.map((r) => [
      r.pin_group_id as number,
      {
        supplierId: r.supplier_id as number,
        charts: (r.charts as DeviceCharts['charts'] | null) ?? [],
        channels: r.channels as DeviceCharts['channels'],
        pinOfChannel: new Map((r.mapping as number[][]).map(([channel, pin]) => [Number(channel), Number(pin)])),
      },
    ]),
  );
}

/** Every (pin, quantity) pair measured on `pinIds`: a skip scan of the (pin, quantity, time) index, one probe per pair. */
export async function measuredPairs(db: Queryable, pinIds: number[]): Promise<{ pinId: number; quantityId: number }[]> {
  if (pinIds.length === 0) return [];
  const { rows } = await db.query<{ pin_id: number; quantity_id: number }>(
    `WITH RECURSIVE pairs AS (
       SELECT p.pin_id, (SELECT m.quantity_id FROM measurement m WHERE m.pin_id = p.pin_id ORDER BY m.quantity_id LIMIT 1) AS quantity_id
         FROM unnest($1::bigint[]) AS p(pin_id)
       UNION ALL
       SELECT pairs.pin_id, (SELECT m.quantity_id FROM measurement m WHERE m.pin_id = pairs.pin_id AND m.quantity_id > pairs.quantity_id ORDER BY m.quantity_id LIMIT 1)
         FROM pairs WHERE pairs.quantity_id IS NOT NULL)
     SELECT pin_id, quantity_id FROM pairs WHERE quantity_id IS NOT NULL`,
    [[...new Set(pinIds)]],
  );
  return rows.map((r) => ({ pinId: r.pin_id, quantityId: r.quantity_id }));
}

interface QuantityRow {
  id: number;
  environmentId: number;
  quantity: Quantity;
  nameText: string;
}

/** Live quantities by id, or by hashId (`byHashId`). */
async function quantitiesOf(
  db: Queryable,
  ids: number[],
  hashIds: string[] = [],
): Promise<{ byId: Map<number, QuantityRow>; byHashId: Map<string, QuantityRow> }> {
  const byId = new Map<number, QuantityRow>();
  const byHashId = new Map<string, QuantityRow>();
  if (ids.length > 0 || hashIds.length > 0) {
    const { rows } = await db.query(
      `SELECT q.id, q.environment_id, q.name_text, ${QUANTITY_SELECT} FROM quantity q
        WHERE (q.id = ANY($1::bigint[]) OR q.hash_id = ANY($2::text[])) AND q.deleted_at IS NULL`,
      [[...new Set(ids)], [...new Set(hashIds)]],
    );
    for (const r of rows) {
      const row = { id: r.id as number, environmentId: r.environment_id as number, quantity: toQuantity(r), nameText: r.name_text as string };
      byId.set(row.id, row);
      byHashId.set(row.quantity.hashId, row);
    }
  }
  return { byId, byHashId };
}

const titleText = (title: Name | null): string | null => (title === null ? null : nameText(title));

/** The automatic charts of every scope (see the top of this file), by scope. */
async function automaticCharts(db: Queryable, scopes: Scope[]): Promise<Map<Scope, ChartSpec[]>> {
  const devices = await deviceChartsOf(db, [...new Set(scopes.flatMap((s) => (s.linkPinGroupId === null ? [] : [s.linkPinGroupId])))]);
  const pairs = await measuredPairs(
    db,
    scopes.flatMap((s) => s.pinIds),
  );
  const wantedHashIds = [...devices.values()].flatMap((d) => [
    ...d.charts.flatMap((c) => c.series.map((s) => s.quantityHashId)),
    ...d.channels.flatMap((ch) => (ch.charts ?? []).flatMap((c) => c.series.map((s) => s.quantityHashId))),
  ]);
  const quantities = await quantitiesOf(
    db,
    pairs.map((p) => p.quantityId),
    wantedHashIds,
  );
  const measuredOn = new Map<number, number[]>();
  for (const p of pairs) if (quantities.byId.has(p.quantityId)) measuredOn.set(p.pinId, [...(measuredOn.get(p.pinId) ?? []), p.quantityId]);

  const out = new Map<Scope, ChartSpec[]>();
  for (const scope of scopes) {
    const charts: ChartSpec[] = [];
    const shown = new Set<string>();
    const device = scope.linkPinGroupId === null ? undefined : devices.get(scope.linkPinGroupId);
    if (device) {
      // a device type's quantity is one of its supplier's
      const quantityId = (hashId: string) => {
        const q = quantities.byHashId.get(hashId);
        return q && q.environmentId === device.supplierId ? q.id : undefined;
      };
      const add = (title: Name | null, series: { channelIndex: number; quantityHashId: string; color?: string | null }[]) => {
        const specs: ChartSpec['series'] = [];
        for (const s of series) {
          const pinId = device.pinOfChannel.get(s.channelIndex);
          const q = quantityId(s.quantityHashId);
          if (pinId === undefined || q === undefined || (scope.onlyPinId !== null && pinId !== scope.onlyPinId)) continue;
          specs.push({ pinId, quantityId: q, color: s.color ?? null });
          shown.add(pairKey(pinId, q));
        }
        if (specs.length > 0) charts.push({ title: titleText(title), series: specs });
      };
      for (const chart of device.charts) add(chart.title, chart.series);
      device.channels.forEach((channel, channelIndex) => {
        for (const chart of channel.charts ?? [])
          add(
            chart.title,
            chart.series.map((s) => ({ ...s, channelIndex })),
          );
      });
    }
    // the measured quantities not shown yet: one chart per quantity, a series per pin
    const byQuantity = new Map<number, number[]>();
    for (const pinId of scope.pinIds) {
      for (const q of measuredOn.get(pinId) ?? []) {
        if (shown.has(pairKey(pinId, q))) continue;
        byQuantity.set(q, [...(byQuantity.get(q) ?? []), pinId]);
      }
    }
    const ordered = [...byQuantity.keys()]
      .map((id) => quantities.byId.get(id)!)
      .sort((a, b) => a.nameText.localeCompare(b.nameText) || a.quantity.hashId.localeCompare(b.quantity.hashId));
    for (const q of ordered) {
      const pins = byQuantity.get(q.id)!;
      for (let i = 0; i < pins.length; i += MAX_SERIES_PER_CHART) {
        charts.push({ title: q.nameText, series: pins.slice(i, i + MAX_SERIES_PER_CHART).map((pinId) => ({ pinId, quantityId: q.id, color: null })) });
      }
    }
    out.set(scope, charts);
  }
  return out;
}

const pinThresholdWithPin = (t: Omit<PinThreshold, 'pinHashId'> | undefined, pinHashId: string): PinThreshold | null => (t ? { ...t, pinHashId } : null);

/** Charts by id as the SDK's chart model: each series with its quantity, pin, pin group and threshold; series of deleted pins or quantities drop out. */
async function renderCharts(db: Queryable, environmentId: number, specs: ChartSpec[][]): Promise<Chart[][]> {
  const all = specs.flat().flatMap((c) => c.series);
  const pinIds = [...new Set(all.map((s) => s.pinId))];
  const [{ rows: pinRows }, quantities, thresholds] = await Promise.all([
    pinIds.length === 0
      ? { rows: [] }
      : db.query(
          `SELECT ${PIN_SELECT}, ${PIN_GROUP_SELECT} FROM pin p JOIN pin_group pg ON pg.id = p.pin_group_id ${PIN_GROUP_LINK_JOIN}
        WHERE p.environment_id = $1 AND p.id = ANY($2::bigint[])`,
          [environmentId, pinIds],
        ),
    quantitiesOf(
      db,
      all.map((s) => s.quantityId),
    ),
    pinThresholdOf(db, environmentId, all),
  ]);
  const pins = new Map(pinRows.map((r) => [r.p_id as number, { pin: toPin(r), pinGroup: toPinGroup(r) }]));
  return specs.map((charts) =>
    charts.map((chart) => ({
      title: chart.title,
      series: chart.series.flatMap((s) => {
        const p = pins.get(s.pinId);
        const q = quantities.byId.get(s.quantityId);
        if (!p || !q) return [];
        return [
          {
            quantity: q.quantity,
            pin: p.pin,
            pinGroup: p.pinGroup,
            color: s.color,
            pinThreshold: pinThresholdWithPin(thresholds.get(pairKey(s.pinId, s.quantityId)), p.pin.hashId),
          },
        ];
      }),
    })),
  );
}

/** The panels of `hashIds` (all of kind `kind`), in order; an unknown one is reported through `missing`. */
async function panelsOf(
  db: Queryable,
  environmentId: number,
  kind: PanelKind,
  hashIds: string[],
  missing: (i: number, hashId: string) => Error,
): Promise<Panel[]> {
  const scopes = await loadScopes(db, environmentId, kind, hashIds);
  const ordered = hashIds.map((h, i) => {
    const scope = scopes.get(h);
    if (!scope) throw missing(i, h);
    return scope;
  });
  const unique = [...new Set(ordered)];
  const [{ rows: saved }, automatic] = await Promise.all([
    db.query<{ object_id: number; last_mode: 'manual' | 'automatic'; manual_charts: ChartSpec[] }>(
      `SELECT ${PANEL_COLUMN[kind]} AS object_id, last_mode, manual_charts FROM chart_panel WHERE environment_id = $1 AND ${PANEL_COLUMN[kind]} = ANY($2::bigint[])`,
      [environmentId, unique.map((s) => s.id)],
    ),
    automaticCharts(db, unique),
  ]);
  const savedOf = new Map(saved.map((r) => [r.object_id, r]));
  const specs = unique.flatMap((s) => [automatic.get(s)!, savedOf.get(s.id)?.manual_charts ?? []]);
  const rendered = await renderCharts(db, environmentId, specs);
  const panels = new Map(
    unique.map((s, i) => [
      s,
      {
        lastMode: savedOf.get(s.id)?.last_mode ?? 'automatic',
        charts: { automatic: rendered[2 * i], manual: rendered[2 * i + 1] },
      } satisfies Panel,
    ]),
  );
  return ordered.map((s) => panels.get(s)!);
}

export interface PanelTarget {
  kind: PanelKind;
  hashId: string;
}

/** The one object a panel query names (`pinGroupHashId`, `gridHashId`, `edgeHashId` or `pinHashId`); anything else is a parameter_error. */
export function panelTarget(query: Partial<Record<`${PanelKind}HashId`, string>>): PanelTarget {
  const named = (Object.keys(NOUN) as PanelKind[]).filter((k) => query[`${k}HashId`] !== undefined);
  if (named.length !== 1) throw new ParameterError('the query names exactly one of pinGroupHashId, gridHashId, edgeHashId, pinHashId');
  return { kind: named[0], hashId: query[`${named[0]}HashId`]! };
}

/** chart panel get: another environment's object is not found. */
export async function getPanel(db: Queryable, environmentId: number, target: PanelTarget): Promise<Panel> {
  const [panel] = await panelsOf(db, environmentId, target.kind, [target.hashId], (_i, h) => new NotFoundError(NOUN[target.kind], h));
  return panel;
}

export interface PanelsQuery {
  pinGroupHashIds?: string[];
  pinHashIds?: string[];
}

/** chart panels get: the panels of the named pin groups and pins, in the order named. */
export async function getPanels(db: Queryable, environmentId: number, q: PanelsQuery) {
  const missing = (field: string, noun: string) => (i: number, h: string) => new ParameterError(`${field}[${i}] ${h} is not a ${noun} of this environment`);
  const [pinGroups, pins] = await Promise.all([
    panelsOf(db, environmentId, 'pinGroup', q.pinGroupHashIds ?? [], missing('pinGroupHashIds', 'pin group')),
    panelsOf(db, environmentId, 'pin', q.pinHashIds ?? [], missing('pinHashIds', 'pin')),
  ]);
  // a list is left out when empty: the SDK's response schema wants at least one item in a list that is there
  return {
    ...(pinGroups.length > 0 ? { pinGroups: pinGroups.map((panel, i) => ({ hashId: q.pinGroupHashIds![i], panel })) } : {}),
    ...(pins.length > 0 ? { pins: pins.map((panel, i) => ({ hashId: q.pinHashIds![i], panel })) } : {}),
  };
}

export interface ManualChartInput {
  title: string | null;
  series: { quantityHashId: string; pinHashId: string; color?: string | null }[];
}
export interface PanelUpdate {
  lastMode?: 'manual' | 'automatic';
  manualCharts?: ManualChartInput[];
}

/** manualCharts as stored: every pin and quantity checked (parameter_error naming `field`.manualCharts[i].series[j]). */
async function manualSpecs(db: Queryable, environmentId: number, charts: ManualChartInput[], field: string): Promise<ChartSpec[]> {
  if (charts.length > MAX_MANUAL_CHARTS) throw new ParameterError(`${field}manualCharts holds at most ${MAX_MANUAL_CHARTS} charts`);
  const refs = charts.flatMap((c, i) => {
    if (c.series.length > MAX_SERIES_PER_CHART) throw new ParameterError(`${field}manualCharts[${i}].series holds at most ${MAX_SERIES_PER_CHART} series`);
    return c.series.map((s, j) => ({ ...s, field: `${field}manualCharts[${i}].series[${j}]` }));
  });
  const resolved = await resolveSeries(db, environmentId, refs, (k) => refs[k].field);
  let k = 0;
  return charts.map((c) => ({
    title: c.title,
    series: c.series.map((s) => {
      const r = resolved[k++];
      return { pinId: r.pinId, quantityId: r.quantityId, color: s.color ?? null };
    }),
  }));
}

interface Write {
  kind: PanelKind;
  id: number;
  lastMode?: 'manual' | 'automatic';
  charts?: ChartSpec[];
}

async function write(db: Queryable, environmentId: number, w: Write): Promise<void> {
  const column = PANEL_COLUMN[w.kind];
  await db.query(
    `INSERT INTO chart_panel (environment_id, ${column}, last_mode, manual_charts) VALUES ($1, $2, COALESCE($3, 'automatic'), COALESCE($4::jsonb, '[]'))
     ON CONFLICT (${column}) DO UPDATE SET last_mode = COALESCE($3, chart_panel.last_mode), manual_charts = COALESCE($4::jsonb, chart_panel.manual_charts), updated_at = now()`,
    [environmentId, w.id, w.lastMode ?? null, w.charts === undefined ? null : JSON.stringify(w.charts)],
  );
}

/** chart panel update: members left out keep their value (a new panel starts automatic, without manual charts). */
export async function updatePanel(db: Db, environmentId: number, target: PanelTarget, update: PanelUpdate): Promise<void> {
  const scope = (await loadScopes(db, environmentId, target.kind, [target.hashId])).get(target.hashId);
  if (!scope) throw new NotFoundError(NOUN[target.kind], target.hashId);
  const charts = update.manualCharts === undefined ? undefined : await manualSpecs(db, environmentId, update.manualCharts, '');
  await write(db, environmentId, { kind: target.kind, id: scope.id, lastMode: update.lastMode, charts });
}

export interface PanelsUpdate {
  pinGroups?: { hashId: string; panel: PanelUpdate }[];
  pins?: { hashId: string; panel: PanelUpdate }[];
}

/** chart panels update: every item checked first, then all written in one transaction (nothing is half-applied). */
export async function updatePanels(db: Db, environmentId: number, body: PanelsUpdate): Promise<void> {
  const writes: Write[] = [];
  for (const [kind, field, items] of [
    ['pinGroup', 'pinGroups', body.pinGroups ?? []],
    ['pin', 'pins', body.pins ?? []],
  ] as const) {
    const scopes = await loadScopes(
      db,
      environmentId,
      kind,
      items.map((x) => x.hashId),
    );
    const seen = new Set<string>();
    for (const [i, item] of items.entries()) {
      const scope = scopes.get(item.hashId);
      if (!scope) throw new ParameterError(`${field}[${i}].hashId ${item.hashId} is not a ${NOUN[kind]} of this environment`);
      if (seen.has(item.hashId)) throw new ParameterError(`${field}[${i}].hashId ${item.hashId} is listed twice`);
      seen.add(item.hashId);
      const charts = item.panel.manualCharts === undefined ? undefined : await manualSpecs(db, environmentId, item.panel.manualCharts, `${field}[${i}].panel.`);
      writes.push({ kind, id: scope.id, lastMode: item.panel.lastMode, charts });
    }
  }
  await db.tx(async (client) => {
    for (const w of writes) await write(client, environmentId, w);
  });
}
