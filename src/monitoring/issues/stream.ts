// Issues as they happen, as server-sent events (GET /issue/stream): the console's issue list and map show a new
// issue while the page is open. The issue notifier (src/notifications/issue-notifier.ts) takes every event of the
// outbox issue_event (opened, raised, closed, comment: whatever opened it, a user, a threshold or the connectivity
// check) and, once its transaction committed, publishes them here on the environment's Redis channel
// (QUEUE_NAME:live-issue:<environment id>), so any API process can serve any stream.
//
// The fan-out is the live log's (src/connectivity/live/): one Redis subscriber per process (LiveLogHub, its notices
// carry no device, so every stream of the environment matches), the same EventStream writer, and the same leases
// (LIVE_LOG_STREAMS_PER_ENVIRONMENT per environment over every API process, counted apart from the live log's).
// Tenant isolation: a stream subscribes only its own environment's channel, and each issue is read back within
// that environment.

import { randomUUID } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import type { Queryable } from '../../app/db.ts';
import { createRedis } from '../../app/redis.ts';
import { EventStream, KEEPALIVE_MS, RETRY_MS } from '../../connectivity/live/event-stream.ts';
import { LiveLogHub } from '../../connectivity/live/hub.ts';
import { leaseStream, releaseStream, takeStreamLease } from '../../connectivity/live/leases.ts';
import { typed } from '../../http/typed.ts';
import { readRights } from '../graph-schemas.ts';
import { ISSUE_FROM, ISSUE_SELECT, toIssue } from './view.ts';

export const liveIssueChannel = (config: { queueName: string }, environmentId: number) => `${config.queueName}:live-issue:${environmentId}`;

/** What happened to an issue, as issue_event names it. */
export type IssueEventKind = 'opened' | 'raised' | 'closed' | 'comment';

/** One notice on an environment's channel (the shape LiveLogHub reads: hashId, and no device filter). */
interface IssueNotice {
  hashId: string;
  kind: IssueEventKind;
  level: number;
  deviceId: null;
  deviceTypeId: null;
}

/**
 * Publishes the events the notifier took (after its transaction committed). Never throws: a live view loses a
 * notice (logged) rather than failing the notifications.
 */
export async function publishIssueEvents(
  ctx: Pick<AppContext, 'db' | 'redis' | 'config' | 'log'>,
  events: { issue_id: number; kind: string; level: number }[],
): Promise<void> {
  if (events.length === 0) return;
  try {
    const { rows } = await ctx.db.query<{ id: string; hash_id: string; environment_id: string }>(
      'SELECT id, hash_id, environment_id FROM issue WHERE id = ANY($1::bigint[]) AND deleted_at IS NULL',
      [[...new Set(events.map((e) => e.issue_id))]],
    );
    const byId = new Map(rows.map((r) => [Number(r.id), r]));
    const byEnvironment = new Map<number, IssueNotice[]>();
    for (const e of events) {
      const r = byId.get(Number(e.issue_id));
      if (!r) continue;
      const env = Number(r.environment_id);
      const list = byEnvironment.get(env) ?? [];
      list.push({ hashId: r.hash_id, kind: e.kind as IssueEventKind, level: e.level, deviceId: null, deviceTypeId: null });
      byEnvironment.set(env, list);
    }
    await Promise.all([...byEnvironment].map(([env, notices]) => ctx.redis.publish(liveIssueChannel(ctx.config, env), JSON.stringify(notices))));
  } catch (err) {
    ctx.log.warn({ err: (err as Error).message }, 'live issue notices could not be published');
  }
}

/** The issue as issue find lists it, read within its environment. */
async function loadIssue(db: Queryable, environmentId: number, hashId: string): Promise<unknown> {
  const { rows } = await db.query(`SELECT ${ISSUE_SELECT} FROM ${ISSUE_FROM} WHERE i.environment_id = $1 AND i.hash_id = $2 AND i.deleted_at IS NULL`, [
    environmentId,
    hashId,
  ]);
  return rows.length === 0 ? null : toIssue(rows[0]);
}

const StreamQuery = Type.Object(
  {
    apiVersion: Type.Optional(Type.String({ maxLength: 8, description: "in place of the header Api-Version (a browser's EventSource sends no headers)" })),
    environmentHashId: Type.Optional(Type.String({ maxLength: 80, description: 'in place of the header Environment-Hash-Id' })),
  },
  { additionalProperties: false },
);

const DESCRIPTION =
  "Server-sent events (text/event-stream) of what happens to the environment's issues from the moment the stream is open: " +
  '`event: issue`, `id: <issue hashId>`, `data: {kind, issue}` where kind is opened, raised, closed or comment and issue the Issue model. ' +
  `Events come within about a second (the notifier's scan). The stream starts with \`retry: ${RETRY_MS}\` and sends a \`: keepalive\` comment every ${KEEPALIVE_MS / 1000} s. ` +
  'The query parameters apiVersion and environmentHashId may stand for the headers Api-Version and Environment-Hash-Id. ' +
  'At most LIVE_LOG_STREAMS_PER_ENVIRONMENT issue streams of one environment are open at once over every API process: one more is 429 rate_limit_error.';

/** GET /issue/stream. */
export async function issueStreamRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const hub = new LiveLogHub({
    subscriber: () => createRedis(ctx.config, ctx.log),
    channel: (environmentId) => liveIssueChannel(ctx.config, environmentId),
    load: (environmentId, hashId) => loadIssue(ctx.db, environmentId, hashId),
    log: ctx.log,
  });
  const open = new Set<EventStream>();
  app.addHook('preClose', async () => {
    for (const s of [...open]) s.end();
  });
  app.addHook('onClose', async () => hub.close());

  app.get(
    '/issue/stream',
    {
      config: { rights: readRights, headersFromQuery: true },
      schema: { tags: ['issue'], summary: 'issue stream', description: DESCRIPTION, querystring: StreamQuery, produces: ['text/event-stream'] },
    },
    async (request, reply) => {
      const environment = request.account.environment;
      const streamId = randomUUID();
      // the issue streams' leases are counted apart from the live log's
      const leaseOf = `issues:${environment.hashId}`;
      await takeStreamLease(ctx, leaseOf, streamId);
      let stream: EventStream | null = null;
      let remove: () => void;
      try {
        remove = await hub.add({
          environmentId: environment.id,
          deviceId: null,
          deviceTypeId: null,
          deliver: (issue, notice) => {
            if (!stream || issue === null) return;
            const n = notice as unknown as IssueNotice;
            stream.send('issue', n.hashId, JSON.stringify({ kind: n.kind, issue }));
          },
        });
      } catch (err) {
        await releaseStream(ctx, leaseOf, streamId);
        throw err;
      }
      reply.hijack();
      const opened = new EventStream(reply.raw, () => {
        leaseStream(ctx, leaseOf, streamId).then(
          (held) => held || opened.end(),
          () => undefined,
        );
      });
      stream = opened;
      open.add(opened);
      opened.onEnd(() => {
        open.delete(opened);
        remove();
        releaseStream(ctx, leaseOf, streamId).catch(() => undefined);
      });
    },
  );
}
