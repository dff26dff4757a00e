// The analytics query as the SDK's src/models/analytics-query.ts describes it (what a card holds and
// what GET /analytics/ takes), and the limits this service puts on it.

export type Field = string | { expression: string };
export interface Constraint {
  /** a field, or (a number or stringified number) the index of a column */
  left: Field | number;
  comparison: string;
  right?: { field?: string | number; value?: string | number | boolean };
}
export interface Condition {
  type: string;
  restrictions?: (Constraint | Condition)[];
}
export type ColumnIndexRef = { columnIndex: number };
export interface Column {
  type?: string;
  field?: Field;
  name?: string;
  dataTypeHint?: string;
  condition?: Condition;
  granularity?: string;
}
export interface AnalyticsQuery {
  source: string;
  columns: Column[];
  filter?: Condition;
  limitBy?: { limitedTo: number; per?: ColumnIndexRef[]; sortedBy?: (ColumnIndexRef & { descending: boolean })[] };
  offset?: string;
  sort?: (ColumnIndexRef & { descending: boolean })[];
  rowsPerPage?: number;
}

/** Limits of a query, each answered with a parameter_error naming the member. */
export const QUERY_LIMITS = {
  /** columns of a query (a result row's cells) */
  columns: 20,
  /** nesting of conditions in a filter or a column's condition (the top condition is level 1) */
  conditionDepth: 5,
  /** constraints in all conditions of a query together */
  constraints: 50,
  /** rows a limitBy keeps per group */
  limitedTo: 10_000,
  /** rows of a page (rowsPerPage), as the SDK's model allows */
  rowsPerPage: 100,
  defaultRowsPerPage: 20,
  /** characters of a compared string value or a form-field key */
  valueLength: 1000,
} as const;

export const AGGREGATIONS = ['count', 'share', 'sum', 'mean', 'min', 'max', 'any'] as const;
export const GRANULARITIES = ['hour', 'day', 'week', 'month', 'year', 'hourOfTheDay', 'dayOfTheWeek', 'monthOfTheYear'] as const;
// inGrid: SDK releases up to Api-Version 6 (17.37.0) have it
export const COMPARISONS = ['=', '>=', '<=', '>', '<', 'like', '<>', 'isNull', 'isNotNull', 'isNamedRange', 'notLike', 'inGrid'] as const;
export const DATA_TYPE_HINTS = ['string', 'integer', 'number', 'boolean', 'hashId'] as const;
