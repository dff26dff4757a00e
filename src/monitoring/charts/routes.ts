import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { HashId, HashIdParams } from '../../http/schemas.ts';
import { readRights } from '../graph-schemas.ts';
import { getPanel, getPanels, MAX_MANUAL_CHARTS, MAX_PANEL_PINS, MAX_SERIES_PER_CHART, panelTarget, updatePanel, updatePanels } from './panels.ts';
import { MAX_OBSERVATIONS, observationsOf } from './observations.ts';
import { chartSeries, MAX_BUCKETS, MAX_BUCKETS_HIGH_RESOLUTION } from './series.ts';

// the SDK's right for changing a chart panel (update-panel.ts, update-panels.ts)
const panelRights = { monitoring: 'REPORTS' };
/** pin groups and pins per panels get / update: the SDK sends up to 30 of each; a dashboard of 100 locations is one call here */
const MAX_PANELS = 100;

const DateText = Type.String({ minLength: 1, maxLength: 64, description: 'ISO 8601, or milliseconds since 1970' });
const SeriesQuerySchema = Type.Object({
  startAt: DateText,
  endAt: DateText,
  series: Type.Optional(Type.Array(Type.Object({ pinHashId: HashId, quantityHashId: HashId }, { additionalProperties: false }), { maxItems: 40 })),
  highResolution: Type.Optional(Type.Boolean()),
});
const RangeQuery = Type.Object({ from: DateText, to: DateText });
const PanelQuery = Type.Object({
  pinGroupHashId: Type.Optional(HashId),
  gridHashId: Type.Optional(HashId),
  edgeHashId: Type.Optional(HashId),
  pinHashId: Type.Optional(HashId),
});
const PanelsQuerySchema = Type.Object({
  pinGroupHashIds: Type.Optional(Type.Array(HashId, { maxItems: MAX_PANELS })),
  pinHashIds: Type.Optional(Type.Array(HashId, { maxItems: MAX_PANELS })),
});
// null first: with coerceTypes a string branch tried first would turn null into ''
const Color = Type.Union([Type.Null(), Type.String({ minLength: 1, maxLength: 64 })], { description: 'A hex color string' });
const PanelBody = Type.Object(
  {
    lastMode: Type.Optional(Type.Union([Type.Literal('manual'), Type.Literal('automatic')])),
    manualCharts: Type.Optional(
      Type.Array(
        Type.Object(
          {
            title: Type.Union([Type.Null(), Type.String({ minLength: 1, maxLength: 255 })]),
            series: Type.Array(Type.Object({ quantityHashId: HashId, pinHashId: HashId, color: Type.Optional(Color) }, { additionalProperties: false }), {
              maxItems: MAX_SERIES_PER_CHART,
            }),
          },
          { additionalProperties: false },
        ),
        { maxItems: MAX_MANUAL_CHARTS },
      ),
    ),
  },
  { additionalProperties: false },
);
const PanelsItems = Type.Optional(Type.Array(Type.Object({ hashId: HashId, panel: PanelBody }, { additionalProperties: false }), { maxItems: MAX_PANELS }));
const PanelsBody = Type.Object({ pinGroups: PanelsItems, pins: PanelsItems }, { additionalProperties: false });

const tags = ['chart'];

const SERIES_DESCRIPTION =
  'The measurements of each (pin, quantity) series in [startAt, endAt), in the order asked; each series as ' +
  '`{pinHashId, quantityHashId, measurements, reduction}`. A series with at most ' +
  `${2 * MAX_BUCKETS} measurements in the range (${2 * MAX_BUCKETS_HIGH_RESOLUTION} with highResolution) is answered raw and \`reduction\` is null. ` +
  `A longer one is reduced on the server: the range is cut into at most ${MAX_BUCKETS} equal buckets (${MAX_BUCKETS_HIGH_RESOLUTION} with highResolution) ` +
  'of `bucketSeconds`: a whole number of seconds from startAt or, once a bucket is an hour or longer, a whole number of hours from the ' +
  'UTC hour at or before startAt (the first bucket may then start before startAt; it holds only measurements from startAt on). ' +
  'Each bucket holding measurements is answered ' +
  'by its lowest and its highest measurement (one when they are the same), so peaks stay visible; both are real measurements. ' +
  "`reduction` (a member the SDK's response model allows as an unknown key) then states it: " +
  '`{kind: "minMax", pointCount, bucketCount, bucketSeconds, buckets: [{startAt, count, mean}]}` with the number of measurements ' +
  'in the range and, per non-empty bucket, its measurement count and mean value (significand * 10^orderOfMagnitude). ' +
  'A pin must be one of this environment, a quantity one of this environment, one measured on that pin, or one of the supplier of the ' +
  "device linked to the pin's pin group; anything else (another environment's pin or quantity included) is a parameter_error naming " +
  '`series[i].pinHashId` or `series[i].quantityHashId`. `series` left out (how axios sends an empty list) answers no series. ' +
  "performance compares each value with the pin's own threshold for the quantity, else the quantity's default thresholds: -1 none applies, 0 within, 1 beyond low or high, 2 beyond a critical limit.";

const PANEL_DESCRIPTION =
  '`charts.automatic` is derived when read: for a pin group (or pin) the charts of the device type of the linked device ' +
  "(its `charts` by channelIndex and each channel's `charts`, on the pins the channels are mapped to; for a pin only its series), " +
  "then one chart per further quantity measured on the panel's pins, titled by the quantity, a series per pin " +
  `(at most ${MAX_SERIES_PER_CHART} series a chart; a grid's or edge's panel looks at its first ${MAX_PANEL_PINS} pins). ` +
  '`charts.manual` and `lastMode` are as last saved with chart panel update (a panel never saved: automatic, no manual charts). ' +
  'Series of pins or quantities deleted since are left out. pinThreshold is null where the pin has no threshold for the quantity.';

/** Charts: series of measurements, and chart panels of pin groups, grids, edges and pins. */
export async function chartRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/chart/',
    {
      config: { rights: readRights },
      schema: { tags, summary: 'chart series', description: SERIES_DESCRIPTION, querystring: SeriesQuerySchema },
    },
    async (request) => chartSeries(ctx.db.read, request.account.environment.id, request.query),
  );

  // SDK 17's plotting routes (18.3.1 dropped them for chart series)
  const observations = `Up to ${MAX_OBSERVATIONS} measurements in [from, to) with their quantities, by generatedAt; with more in the range, each series' lowest and highest per equal time bucket (moreMeasurementsAvailable). lowerbound and upperbound: the first and last generatedAt in the range.`;
  app.get(
    '/graph/pin/:hashId/measurements',
    {
      config: { rights: readRights },
      schema: {
        tags: ['graph'],
        summary: 'graph getPinMeasurements',
        description: `The pin's measurements. ${observations}`,
        params: HashIdParams,
        querystring: RangeQuery,
      },
    },
    async (request) => observationsOf(ctx.db.read, request.account.environment.id, { pinHashId: request.params.hashId }, request.query),
  );
  app.get(
    '/graph/edge/:hashId/measurements',
    {
      config: { rights: readRights },
      schema: {
        tags: ['graph'],
        summary: 'graph getEdgeMeasurements',
        description: `The measurements of the pins on the edge. ${observations}`,
        params: HashIdParams,
        querystring: RangeQuery,
      },
    },
    async (request) => observationsOf(ctx.db.read, request.account.environment.id, { edgeHashId: request.params.hashId }, request.query),
  );

  app.get(
    '/chart/panel',
    {
      config: { rights: readRights },
      schema: {
        tags,
        summary: 'chart panel get',
        description: `The query names exactly one of pinGroupHashId, gridHashId, edgeHashId, pinHashId; another environment's object is not_found_error. ${PANEL_DESCRIPTION}`,
        querystring: PanelQuery,
      },
    },
    async (request) => getPanel(ctx.db, request.account.environment.id, panelTarget(request.query)),
  );

  app.get(
    '/chart/panels',
    {
      config: { rights: readRights },
      schema: {
        tags,
        summary: 'chart panels get',
        querystring: PanelsQuerySchema,
        description:
          `The panels of up to ${MAX_PANELS} pin groups and ${MAX_PANELS} pins (the SDK sends up to 30 of each), answered in the order named as ` +
          '`{pinGroups: [{hashId, panel}], pins: [{hashId, panel}]}` (a list left out when nothing was asked for it: the SDK wants at least one item in a list that is there). A hashId that is not one of this environment is a ' +
          `parameter_error naming pinGroupHashIds[i] or pinHashIds[i]. ${PANEL_DESCRIPTION}`,
      },
    },
    async (request) => getPanels(ctx.db, request.account.environment.id, request.query),
  );

  app.post(
    '/chart/panel',
    {
      config: { rights: panelRights },
      schema: {
        tags,
        summary: 'chart panel update',
        querystring: PanelQuery,
        body: PanelBody,
        description:
          "The query names the panel as for chart panel get (not_found_error for another environment's object). Members left out keep " +
          `their value. manualCharts replaces the manual charts: at most ${MAX_MANUAL_CHARTS} charts of at most ${MAX_SERIES_PER_CHART} series; ` +
          "each series' pin and quantity as for chart series (parameter_error naming manualCharts[i].series[j].pinHashId or .quantityHashId). Needs the right REPORTS, as in the SDK.",
      },
    },
    async (request, reply) => {
      await updatePanel(ctx.db, request.account.environment.id, panelTarget(request.query), request.body);
      reply.status(204).send();
    },
  );

  app.post(
    '/chart/panels',
    {
      config: { rights: panelRights },
      schema: {
        tags,
        summary: 'chart panels update',
        body: PanelsBody,
        description:
          `Updates the panels of up to ${MAX_PANELS} pin groups and ${MAX_PANELS} pins as chart panel update does each, all or nothing. ` +
          'A hashId that is not one of this environment, or named twice, is a parameter_error naming pinGroups[i].hashId or pins[i].hashId. Needs the right REPORTS, as in the SDK.',
      },
    },
    async (request, reply) => {
      await updatePanels(ctx.db, request.account.environment.id, request.body);
      reply.status(204).send();
    },
  );
}
