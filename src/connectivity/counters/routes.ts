import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { HashIdParams, Timestamp } from '../../http/schemas.ts';
import { counterRange, MAX_RANGE_HOURS, readDeviceCounters } from './store.ts';

const Query = Type.Object(
  {
    from: Type.Optional({ ...Timestamp, description: 'start (inclusive; its whole hour counts). Default: 24 hours before to' }),
    to: Type.Optional({ ...Timestamp, description: `end (exclusive). Default: now. At most ${MAX_RANGE_HOURS} hours after from` }),
  },
  { additionalProperties: false },
);

const Entry = Type.Object({
  key: Type.String({
    description:
      'a built-in counter (contacts, handshakeFailures, refusedContacts, handlerFailures, reports, reportFailures, commandsSent, reportingCounter, reportsLate) or the hashId of a device-connectivity-counter-key',
  }),
  name: Type.String({ description: "the built-in counter's name, or the counter key's name" }),
  total: Type.Integer(),
  values: Type.Array(Type.Object({ hour: Type.String({ description: 'start of the hour, UTC' }), value: Type.Integer() }), {
    description: 'hours with a count, oldest first',
  }),
});

export async function counterRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/device/device/:hashId/connectivity-counters',
    {
      config: { rights: { connectivity: 'ENVIRONMENT_ADMIN' } },
      schema: {
        tags: ['device'],
        summary: 'device getConnectivityCounters',
        description:
          'The connectivity counters of a device per key and per hour for the hours overlapping [from, to): one entry per built-in counter and per live counter key of the environment, hours without a count left out.',
        params: HashIdParams,
        querystring: Query,
        response: { 200: Type.Array(Entry) },
      },
    },
    async (request) => {
      const range = counterRange(request.query);
      return readDeviceCounters(ctx, request.account.environment.id, request.params.hashId, range);
    },
  );
}
