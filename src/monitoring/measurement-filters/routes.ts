import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { FindQuery, HashId, Timestamp } from '../../http/schemas.ts';
import { readRights } from '../graph-schemas.ts';
import {
  addMeasurementFilter,
  deleteMeasurementFilter,
  findMeasurementFilters,
  getMeasurementFilter,
  updateMeasurementFilter,
  type MeasurementFilterInput,
} from './store.ts';

const Period = Type.Union([
  Type.Union([Type.Literal('lastMonth'), Type.Literal('lastQuarter'), Type.Literal('lastYear')]),
  Type.Object({ since: Type.Optional(Timestamp), before: Type.Optional(Timestamp) }, { additionalProperties: false }),
]);
const FieldKey = Type.String({ minLength: 1, maxLength: 64 });
// the SDK bounds neither list; no environment configures more pin or edge fields than this
const OtherFieldKeys = Type.Array(FieldKey, { maxItems: 50 });

const AddBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    description: Type.String({ maxLength: 255 }),
    period: Period,
    includePinsWithoutReports: Type.Optional(Type.Boolean()),
    reportTypeHashIds: Type.Array(HashId, { maxItems: 20 }),
    gridHashId: Type.Optional(HashId),
    pinGroupHashIds: Type.Optional(Type.Array(HashId, { minItems: 1, maxItems: 50 })),
    quantityHashIds: Type.Array(HashId, { minItems: 1, maxItems: 64 }),
    fieldKeys: Type.Array(FieldKey, { maxItems: 20 }),
    pinFieldKeys: Type.Optional(OtherFieldKeys),
    edgeFieldKeys: Type.Optional(OtherFieldKeys),
  },
  { additionalProperties: false },
);
const FilterFind = Type.Object({
  ...FindQuery.properties,
  sortBy: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('hashId'), Type.Literal('updatedAt')])),
});

/** Measurement filters: saved searches through measurements (period, report types, grid or pin groups, quantities, fields); changed with REPORTS, read with READ. */
export async function measurementFilterRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<Static<typeof AddBody>, Partial<Static<typeof AddBody>>>(app, {
    base: '/measurement-filter/',
    noun: 'measurement-filter',
    addBody: AddBody,
    updateBody: Type.Partial(AddBody),
    findQuery: FilterFind,
    rights: { monitoring: 'REPORTS' },
    readRights,
    operations: {
      add: async (env, body) => ({ hashId: await addMeasurementFilter(ctx.db, env, body as MeasurementFilterInput) }),
      find: (env, query) => findMeasurementFilters(ctx.db, env, query),
      get: (env, hashId) => getMeasurementFilter(ctx.db, env, hashId),
      update: (env, hashId, patch) => updateMeasurementFilter(ctx.db, env, hashId, patch as Partial<MeasurementFilterInput>),
      remove: (env, hashId) => deleteMeasurementFilter(ctx.db, env, hashId),
    },
  });
}
