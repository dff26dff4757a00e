// The live log: a supplier's activities as the worker stores them, as server-sent events. The folder's map:
//   notice.ts       the worker's side: once a batch of activities is stored, one notice per environment on its
//                   Redis channel (src/pipeline/worker.ts, given-up.ts)
//   hub.ts          an API process's side: one subscriber connection, an environment's channel subscribed while
//                   the process streams it, each activity read once and fanned out to the streams it matches
//   leases.ts       LIVE_LOG_STREAMS_PER_ENVIRONMENT over every API process (leases in Redis that run out)
//   event-stream.ts the text/event-stream answer: retry, events, keepalive comments, one end
//   routes.ts       GET /supplier-activity/stream (this file); store.ts its filters
// Tenant isolation: a stream subscribes only its own environment's channel, and each activity is read back
// within that environment.

import { randomUUID } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { Histogram } from 'prom-client';
import type { AppContext } from '../../app/context.ts';
import { gaugeFrom } from '../../app/metrics.ts';
import { createRedis } from '../../app/redis.ts';
import { liveActivityChannel } from '../../app/redis-keys.ts';
import { typed } from '../../http/typed.ts';
import { HashId } from '../../http/schemas.ts';
import { shapeForVersion } from '../../http/versions.ts';
import { getActivity } from '../activities/store.ts';
import { EventStream, KEEPALIVE_MS, RETRY_MS } from './event-stream.ts';
import { LiveLogHub } from './hub.ts';
import { leaseStream, releaseStream, takeStreamLease } from './leases.ts';
import { streamFilter } from './store.ts';

const delay = new Histogram({
  name: 'gridgate_live_log_delay_seconds',
  help: "Live log: from an activity's createdAt (as stored) to its event written to a stream (GET /supplier-activity/stream)",
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
});

const StreamQuery = Type.Object(
  {
    deviceHashId: Type.Optional(HashId),
    deviceTypeHashId: Type.Optional(HashId),
    apiVersion: Type.Optional(Type.String({ maxLength: 8, description: "in place of the header Api-Version (a browser's EventSource sends no headers)" })),
    environmentHashId: Type.Optional(Type.String({ maxLength: 80, description: 'in place of the header Environment-Hash-Id' })),
  },
  { additionalProperties: false },
);

const DESCRIPTION =
  `Server-sent events (text/event-stream) of the environment's supplier activities as the worker stores them, from the moment the stream is open (none from before: find those with supplier activity find). ` +
  "Each is `event: activity`, `id: <activity hashId>` and `data:` the JSON supplier activity get answers for it, with `durationMs` (the run's) beside it; " +
  `a retried job may send an activity again (same id). The stream starts with \`retry: ${RETRY_MS}\` and sends a \`: keepalive\` comment every ${KEEPALIVE_MS / 1000} s. ` +
  'deviceHashId and deviceTypeHashId filter (404 when the environment has no such device or device type). ' +
  'As an EventSource cannot set headers, the query parameters apiVersion and environmentHashId may stand for the headers Api-Version and Environment-Hash-Id on this operation. ' +
  'At most LIVE_LOG_STREAMS_PER_ENVIRONMENT streams of one environment are open at once over every API process: one more is 429 rate_limit_error.';

const rights = { connectivity: 'ENVIRONMENT_ADMIN' };

/** GET /supplier-activity/stream: the live log. One Redis subscriber per process serves every stream (./hub.ts). */
export async function liveLogRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const hub = new LiveLogHub({
    subscriber: () => createRedis(ctx.config, ctx.log),
    channel: (environmentId) => liveActivityChannel(ctx.config, environmentId),
    load: (environmentId, hashId) => getActivity(ctx.db, environmentId, hashId),
    log: ctx.log,
  });
  const open = new Set<EventStream>();
  gaugeFrom('gridgate_live_log_streams', 'Live log streams (GET /supplier-activity/stream) this process holds open', [], () => [[{}, hub.size]]);
  // open streams would keep the server's close waiting for ever
  app.addHook('preClose', async () => {
    for (const s of [...open]) s.end();
  });
  app.addHook('onClose', async () => hub.close());

  app.get(
    '/supplier-activity/stream',
    {
      config: { rights, headersFromQuery: true },
      schema: {
        tags: ['supplier-activity'],
        summary: 'supplier activity stream (live log)',
        description: DESCRIPTION,
        querystring: StreamQuery,
        produces: ['text/event-stream'],
      },
    },
    async (request, reply) => {
      const environment = request.account.environment;
      const filter = await streamFilter(ctx.db, environment.id, request.query);
      const streamId = randomUUID();
      await takeStreamLease(ctx, environment.hashId, streamId);
      // events heard before the answer is ours are of activities stored before the client saw the stream open
      let stream: EventStream | null = null;
      let remove: () => void;
      try {
        remove = await hub.add({
          environmentId: environment.id,
          ...filter,
          deliver: (activity, notice) => {
            if (!stream) return;
            const {
              activity: { createdAt },
            } = activity as { activity: { createdAt: string } };
            const data = { ...(shapeForVersion(activity, request.apiVersion) as object), durationMs: notice.finishedAt - notice.startedAt };
            if (stream.send('activity', notice.hashId, JSON.stringify(data))) delay.observe(Math.max(0, Date.now() - Date.parse(createdAt)) / 1000);
          },
        });
      } catch (err) {
        await releaseStream(ctx, environment.hashId, streamId);
        throw err;
      }
      // from here on the answer is ours, written as events (no more JSON, no error body)
      reply.hijack();
      const opened = new EventStream(reply.raw, () => {
        leaseStream(ctx, environment.hashId, streamId).then(
          (held) => held || opened.end(),
          () => undefined,
        );
      });
      stream = opened;
      open.add(opened);
      opened.onEnd(() => {
        open.delete(opened);
        remove();
        releaseStream(ctx, environment.hashId, streamId).catch(() => undefined);
      });
    },
  );
}
