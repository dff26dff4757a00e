import { Type, type TSchema } from '@sinclair/typebox';
import { AGGREGATIONS, COMPARISONS, DATA_TYPE_HINTS, QUERY_LIMITS } from './query.ts';

// The SDK's analytics-query, analytics-visualisation and analytics-panel models as TypeBox schemas. Shapes
// only: which sources, fields, granularities and comparisons a query may use is the compiler's business
// (compile.ts), so a stored card may name a source this service does not answer yet.

const Name = Type.String({ maxLength: 255 });
const Text = Type.String({ maxLength: QUERY_LIMITS.valueLength });
const ColumnIndex = Type.Integer({ minimum: 0, maximum: QUERY_LIMITS.columns - 1 });
const Field = Type.Union([
  Type.String({ minLength: 1, maxLength: 512 }),
  Type.Object({ expression: Type.String({ maxLength: 1000 }) }, { additionalProperties: false }),
]);
const literals = (values: readonly string[]) => Type.Union(values.map((v) => Type.Literal(v)));

const Constraint = Type.Object(
  {
    // a field, or the index of a column (a number, or digits as a query string carries it)
    left: Type.Union([Field, Type.Number()]),
    comparison: Type.String({ maxLength: 32 }),
    right: Type.Optional(
      Type.Object(
        {
          field: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 512 }), Type.Number()])),
          value: Type.Optional(Type.Union([Text, Type.Number(), Type.Boolean()])),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

// restrictions may be left out: a query string cannot carry an empty array (the SDK's axios drops it).
// Unrolled to a fixed depth, a few levels past the compiler's limit (whose error names the member).
function condition(depth: number): TSchema {
  return Type.Object(
    {
      type: Type.Union([Type.Literal('or'), Type.Literal('and')]),
      restrictions: Type.Optional(Type.Array(depth > 1 ? Type.Union([Constraint, condition(depth - 1)]) : Constraint, { maxItems: QUERY_LIMITS.constraints })),
    },
    { additionalProperties: false },
  );
}
export const Condition = condition(QUERY_LIMITS.conditionDepth + 3);

// a stored card's columns are one of the SDK's four kinds (so a panel read back passes the SDK's checks)
const StrictColumn = Type.Union([
  Type.Object(
    { field: Type.Optional(Field), name: Type.Optional(Name), dataTypeHint: Type.Optional(literals(DATA_TYPE_HINTS)) },
    { additionalProperties: false },
  ),
  Type.Object({ type: literals(['count', 'share']), condition: Type.Optional(Condition), name: Type.Optional(Name) }, { additionalProperties: false }),
  Type.Object(
    {
      type: literals(AGGREGATIONS.filter((a) => a !== 'count' && a !== 'share')),
      condition: Type.Optional(Condition),
      field: Type.Optional(Field),
      name: Type.Optional(Name),
      dataTypeHint: Type.Optional(literals(DATA_TYPE_HINTS)),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      type: Type.Literal('timeGroup'),
      field: Type.String({ minLength: 1, maxLength: 512 }),
      granularity: Type.String({ maxLength: 32 }),
      name: Type.Optional(Name),
    },
    { additionalProperties: false },
  ),
]);

// a query to answer may hold any of their members: the compiler names the member that is wrong
const Column = Type.Object(
  {
    type: Type.Optional(Type.String({ maxLength: 32 })),
    field: Type.Optional(Field),
    name: Type.Optional(Name),
    dataTypeHint: Type.Optional(Type.String({ maxLength: 32 })),
    condition: Type.Optional(Condition),
    granularity: Type.Optional(Type.String({ maxLength: 32 })),
  },
  { additionalProperties: false },
);

const SortItem = Type.Object({ columnIndex: ColumnIndex, descending: Type.Boolean() }, { additionalProperties: false });

/** The SDK's analyticsQuery; `comparison` is checked by the compiler against COMPARISONS. */
const query = (column: TSchema) =>
  Type.Object(
    {
      source: Type.String({ minLength: 1, maxLength: 64 }),
      columns: Type.Array(column, { minItems: 1, maxItems: QUERY_LIMITS.columns }),
      filter: Type.Optional(Condition),
      limitBy: Type.Optional(
        Type.Object(
          {
            limitedTo: Type.Integer({ minimum: 1, maximum: QUERY_LIMITS.limitedTo }),
            per: Type.Optional(Type.Array(Type.Object({ columnIndex: ColumnIndex }, { additionalProperties: false }), { maxItems: QUERY_LIMITS.columns })),
            sortedBy: Type.Optional(Type.Array(SortItem, { maxItems: QUERY_LIMITS.columns })),
          },
          { additionalProperties: false },
        ),
      ),
      offset: Type.Optional(Type.String({ maxLength: 1024 })),
      sort: Type.Optional(Type.Array(SortItem, { maxItems: QUERY_LIMITS.columns })),
      rowsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: QUERY_LIMITS.rowsPerPage })),
    },
    { additionalProperties: false, description: `comparisons: ${COMPARISONS.join(', ')}` },
  );
export const AnalyticsQuery = query(Column);
const CardQuery = query(StrictColumn);

const Colors = Type.Array(Type.String({ maxLength: 64 }), { maxItems: 100 });
const graph = (type: TSchema, extra: Record<string, TSchema> = {}) =>
  Type.Object(
    {
      colors: Colors,
      xAxisColumnIndex: Type.Union([Type.Integer(), Type.Null()]),
      forceOrdinal: Type.Boolean(),
      showAllXAxisLabels: Type.Optional(Type.Boolean()),
      type,
      ...extra,
    },
    { additionalProperties: false },
  );

/** The SDK's analyticsVisualisation: a line/scatter or bar chart, a map or a table. */
export const AnalyticsVisualisation = Type.Union([
  graph(literals(['line', 'scatter']), {
    yMin: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
    yMax: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
  }),
  graph(literals(['stacked-bar', 'clustered-bar'])),
  Type.Object(
    {
      type: Type.Literal('map'),
      latitudeColumnIndex: Type.Integer(),
      longitudeColumnIndex: Type.Integer(),
      colorColumnIndex: Type.Union([Type.Integer(), Type.Null()]),
      tooltipColumnIndex: Type.Union([Type.Integer(), Type.Null()]),
      mapLayerKey: Type.String({ maxLength: 64 }),
    },
    { additionalProperties: false },
  ),
  // SDK releases before Api-Version 7 let a table carry a chart's members; they are not stored (store.ts)
  Type.Object(
    {
      type: Type.Literal('table'),
      colors: Type.Optional(Colors),
      xAxisColumnIndex: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
      forceOrdinal: Type.Optional(Type.Boolean()),
      showAllXAxisLabels: Type.Optional(Type.Boolean()),
    },
    { additionalProperties: false },
  ),
]);

/** The SDK's panel layout: a 6-column grid; cards may not overlap (checked in store.ts). */
export const Layout = Type.Array(
  Type.Object(
    {
      x: Type.Integer({ minimum: 0, maximum: 5 }),
      y: Type.Integer({ minimum: 0, maximum: 10_000 }),
      width: Type.Optional(Type.Integer({ minimum: 2, maximum: 6 })),
      height: Type.Optional(Type.Integer({ minimum: 4, maximum: 1000 })),
    },
    { additionalProperties: false },
  ),
  { maxItems: 50 },
);

export const Cards = Type.Array(
  Type.Object(
    {
      title: Type.String({ maxLength: 255 }),
      subtitle: Type.Optional(Type.String({ maxLength: 1000 })),
      query: CardQuery,
      visualisation: AnalyticsVisualisation,
    },
    { additionalProperties: false },
  ),
  { maxItems: 50 },
);

export const PanelTitle = Type.String({ minLength: 1, maxLength: 100 });
