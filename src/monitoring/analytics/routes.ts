import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashIdParams } from '../../http/schemas.ts';
import { typed } from '../../http/typed.ts';
import { EXPRESSION_FUNCTIONS } from './expression.ts';
import { NAMED_RANGE_NAMES } from './compile.ts';
import { QUERY_LIMITS, type AnalyticsQuery as Query } from './query.ts';
import { AnalyticsQuery, Cards, Layout, PanelTitle } from './schemas.ts';
import { SOURCES, TABLES } from './sources.ts';
import {
  addPanel,
  analyticsGate,
  analyticsResults,
  deletePanel,
  findPanels,
  getPanel,
  panelForApiVersion,
  updatePanel,
  type PanelAdd,
  type PanelUpdate,
} from './store.ts';

const AddBody = Type.Object({ title: PanelTitle, layout: Type.Optional(Layout), cards: Cards }, { additionalProperties: false });
const UpdateBody = Type.Object(
  { title: Type.Optional(PanelTitle), layout: Type.Optional(Layout), cards: Type.Optional(Cards) },
  { additionalProperties: false },
);

// rights as the SDK's routes state them: reading needs READ, changing panels REPORTS (monitoring environments only)
const readRights = { monitoring: 'READ' };
const panelRights = { monitoring: 'REPORTS' };
const tags = ['analytics'];

const RESULTS_DESCRIPTION = [
  "Rows of an analytics query over this environment's data; each row is an array of cell values, one per column.",
  `Sources: ${Object.keys(SOURCES).join(', ')}. Fields are <table>.<field> (e.g. pinGroup.hashId, measurement.value), form fields <table>.fields.<key>;`,
  `tables: ${Object.keys(TABLES).join(', ')}. The SDK's other tables are refused with a parameter_error naming the member.`,
  'A field may be a calculation, {expression}: numbers and number or time fields (times as seconds since 1970) with + - * / % and parentheses,',
  `and the functions ${EXPRESSION_FUNCTIONS.join(', ')}; a form field used in it is read as a number ([pin.fields.a key] when its key holds other characters);`,
  'what has no value (division by zero) is null.',
  "Aggregations: count, share (with a condition: percentage of the group's rows meeting it; without: the group's percentage of all rows), sum, mean, min, max,",
  'any (the smallest value; for booleans whether any is true). Columns that are not aggregated group the rows when any column is aggregated.',
  'Time groups (UTC): hour, day, week (ISO, from Monday), month, year truncate to a timestamp; hourOfTheDay 0-23, dayOfTheWeek 1 (Monday) - 7, monthOfTheYear 1-12.',
  'Comparisons: =, <>, <, >, <=, >=, like, notLike (SQL LIKE patterns), isNull, isNotNull, isNamedRange (' + NAMED_RANGE_NAMES.join(', ') + ', UTC),',
  "inGrid (as SDK releases up to Api-Version 6 send it: left pinGroup.hashId or pin.hashId, right.value a grid's hashId).",
  'A filter constraint on a field or a column that is not aggregated selects source rows; one on an aggregated column selects result rows (a top-level "and" may hold both).',
  `Limits: ${QUERY_LIMITS.columns} columns, ${QUERY_LIMITS.constraints} constraints, conditions nested ${QUERY_LIMITS.conditionDepth} deep, limitBy.limitedTo up to ${QUERY_LIMITS.limitedTo},`,
  `rowsPerPage 1 to ${QUERY_LIMITS.rowsPerPage} (default ${QUERY_LIMITS.defaultRowsPerPage}). Rows are sorted by the sort columns, then by every column;`,
  'nextPageOffset is a sealed row position valid for the same query only (results are computed, not keyset-paged: rows added meanwhile may shift a page).',
  'The database computes a query in a read-only transaction for at most ANALYTICS_STATEMENT_TIMEOUT_MS (default 10 s) and then cancels it:',
  'the answer is 400 analytics_query_too_broad (narrow the query with a time filter or a coarser time group).',
  'A process computes ANALYTICS_CONCURRENCY (default 2) queries at once; others wait their turn.',
].join(' ');

/** Analytics (dashboards): panel add / find / get / update / delete and the results of a query. */
export async function analyticsRoutes(untyped: FastifyInstance, ctx: AppContext): Promise<void> {
  // the query's columns are checked by compile.ts, not by the schema (unknown[] there): its three casts below
  const app = typed(untyped);
  const env = (request: { account: { environment: { id: number } } }) => request.account.environment.id;
  const gate = analyticsGate(ctx.config.analyticsConcurrency);
  app.get(
    '/analytics/',
    {
      config: { rights: readRights },
      schema: { tags, summary: 'analytics results', querystring: AnalyticsQuery, description: RESULTS_DESCRIPTION },
    },
    async (request) => analyticsResults(ctx.db.read, env(request), request.query as Query, ctx.config.analyticsStatementTimeoutMs, gate),
  );

  app.post(
    '/analytics/panel',
    {
      config: { rights: panelRights },
      schema: {
        tags,
        summary: 'analytics panel add',
        body: AddBody,
        description:
          'Stores a dashboard: title (1-100 characters), layout (up to 50 non-overlapping {x 0-5, y 0-10000, width 2-6, height 4-1000}), ' +
          "cards (up to 50 of {title, subtitle, query, visualisation}). A card's query is stored as given; GET /analytics/ answers it.",
      },
    },
    async (request) => addPanel(ctx.db, env(request), request.body as PanelAdd),
  );
  app.get(
    '/analytics/panel',
    {
      config: { rights: readRights },
      schema: {
        tags,
        summary: 'analytics panel find',
        querystring: FindQuery,
        description: 'sortBy: hashId (default) or title; search matches the title and hashId.',
      },
    },
    async (request) => {
      const page = await findPanels(ctx.db, env(request), request.query);
      return { ...page, rows: page.rows.map((r) => ({ panel: panelForApiVersion(r.panel, request.apiVersion) })) };
    },
  );
  app.get(
    '/analytics/panel/:hashId',
    {
      config: { rights: readRights },
      schema: { tags, summary: 'analytics panel get', params: HashIdParams },
    },
    async (request) => ({ panel: panelForApiVersion((await getPanel(ctx.db, env(request), request.params.hashId)).panel, request.apiVersion) }),
  );
  app.post(
    '/analytics/:hashId',
    {
      config: { rights: panelRights },
      schema: { tags, summary: 'analytics panel update', params: HashIdParams, body: UpdateBody, description: 'Members left out keep their value.' },
    },
    async (request, reply) => {
      await updatePanel(ctx.db, env(request), request.params.hashId, request.body as PanelUpdate);
      reply.status(204).send();
    },
  );
  app.delete(
    '/analytics/panel/:hashId',
    {
      config: { rights: panelRights },
      schema: {
        tags,
        summary: 'analytics panel delete',
        params: HashIdParams,
        description: 'Accounts that had this panel as their defaultAnalyticsPanelHashId have none afterwards.',
      },
    },
    async (request, reply) => {
      await deletePanel(ctx.db, env(request), request.params.hashId);
      reply.status(204).send();
    },
  );
}
