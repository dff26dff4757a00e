import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { HashId, Timestamp } from '../../http/schemas.ts';
import { readRights } from '../graph-schemas.ts';
import { findMeasurements } from './store.ts';

const HashIds = (maxItems: number) => Type.Optional(Type.Array(HashId, { minItems: 1, maxItems }));
const Keys = Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 20 }));
const FindQuery = Type.Object({
  sortBy: Type.Optional(Type.String()),
  descending: Type.Optional(Type.Boolean()),
  rowsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
  search: Type.Optional(Type.String({ maxLength: 255 })),
  offset: Type.Optional(Type.String({ maxLength: 1024 })),
  updatedAfter: Type.Optional(Timestamp),
  includePinsWithoutReports: Type.Optional(Type.Boolean()),
  reportTypeHashIds: HashIds(20),
  gridHashId: Type.Optional(HashId),
  pinGroupHashIds: HashIds(50),
  pinHashIds: HashIds(50),
  quantityHashIds: HashIds(64),
  fieldKeys: Keys,
  pinFieldKeys: Keys,
  edgeFieldKeys: Keys,
  since: Type.Optional(Timestamp),
  before: Type.Optional(Timestamp),
});

/** measurement find (M-READ): the values of a monitoring environment's pins. */
export async function measurementRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/measurement/',
    {
      config: { rights: readRights },
      schema: {
        tags: ['measurement'],
        summary: 'measurement find',
        querystring: FindQuery,
        description:
          'One row per report and pin. Filters: pinGroupHashIds, pinHashIds, quantityHashIds, reportTypeHashIds, since (included), before (excluded). Sort: pinName (default), generatedAt, pinGroupName, edgeName. ' +
          'includePinsWithoutReports (default true): each pin the pin group, pin and search filters name that has no report row under the other filters gets one row with report null; ' +
          'sorted by a name these rows sit among the others, sorted by generatedAt they come after every report row (by pin). false leaves them out.',
      },
    },
    async (request) => findMeasurements(ctx.db.read, request.account.environment.id, request.query),
  );
}
