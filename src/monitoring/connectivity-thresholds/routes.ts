import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashId } from '../../http/schemas.ts';
import { readRights } from '../graph-schemas.ts';
import { findConnectivityThresholds, setConnectivityThreshold } from './store.ts';

const PriorityLevel = Type.Union([Type.Literal(1), Type.Literal(2)]);
// a week of silence at most; 0 switches that criterion off
const Threshold = Type.Object(
  {
    missedReports: Type.Integer({ minimum: 0, maximum: 10_000 }),
    offlineForSeconds: Type.Integer({ minimum: 0, maximum: 7 * 86_400 }),
  },
  { additionalProperties: false },
);
const SetQuery = Type.Object({ priorityLevel: PriorityLevel, deviceTypeHashId: Type.Optional(HashId) }, { additionalProperties: false });
const SetBody = Type.Object({ connectivityThreshold: Type.Optional(Type.Union([Threshold, Type.Null()])) }, { additionalProperties: false });
const Find = Type.Object({ ...FindQuery.properties, priorityLevel: Type.Optional(PriorityLevel), deviceTypeHashId: Type.Optional(HashId) });

const tags = ['connectivity-threshold'];

/** Connectivity thresholds: when a linked device's silence opens a connectivity issue (src/monitoring/issues/connectivity-check.ts). */
export async function connectivityThresholdRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/connectivity-threshold/find',
    {
      config: { rights: readRights },
      schema: { tags, summary: 'connectivity-threshold find', querystring: Find },
    },
    async (request) => findConnectivityThresholds(ctx.db, request.account.environment.id, request.query),
  );
  app.post(
    '/connectivity-threshold/',
    {
      config: { rights: { monitoring: 'THRESHOLDS' } },
      schema: {
        tags,
        summary: 'connectivity-threshold set',
        querystring: SetQuery,
        body: SetBody,
        description:
          'Creates or replaces the threshold of priorityLevel (1 serious, 2 critical) for deviceTypeHashId (the type of a claimed device; absent: every device type without its own); connectivityThreshold null (or absent) removes it. ' +
          'A linked device silent for offlineForSeconds since its last contact or its link (whichever is later), or past missedReports expected reports (counted from its nextReportBefore), opens a connectivity issue of that level on its pin group; 0 switches a criterion off. ' +
          'A device under no threshold opens a level 1 issue once its own nextReportBefore passes without contact. The check runs every CONNECTIVITY_CHECK_MS.',
      },
    },
    async (request, reply) => {
      const body = request.body;
      await setConnectivityThreshold(ctx.db, request.account.environment.id, request.query, body.connectivityThreshold ?? null);
      reply.status(204).send();
    },
  );
}
