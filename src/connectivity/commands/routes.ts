import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashId, HashIdParams, Timestamp } from '../../http/schemas.ts';
import { queuedCommandEvents, type CommandEventQueue } from './events.ts';
import { announceCommandsAdded } from './pending-hint.ts';
import { addCommands, deleteCommand, deleteCommands, findCommands, getCommand, type CommandEvents, type CommandInput } from './store.ts';

const OneOf = <T extends string>(values: T[]) => Type.Unsafe<T>({ type: 'string', enum: values });
const MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600;

const AddBody = Type.Object(
  {
    objectType: OneOf<'device' | 'pinGroup'>(['device', 'pinGroup']),
    objectHashIds: Type.Array(HashId, { minItems: 1, maxItems: 40 }),
    commandTypeHashId: HashId,
    fields: Type.Record(Type.String(), Type.Unknown()),
    startAt: Type.Optional(Type.Union([Timestamp, Type.Null()])),
    delay: Type.Optional(Type.Number({ minimum: 0, maximum: MAX_DELAY_SECONDS })),
    endAt: Type.Optional(Type.Union([Timestamp, Type.Null()])),
    channelIndices: Type.Optional(Type.Array(Type.Integer({ minimum: 0, maximum: 59 }), { maxItems: 60 })),
    email: Type.Array(Type.String({ format: 'email', maxLength: 254 }), { maxItems: 30 }),
  },
  { additionalProperties: false },
);
const DeleteMultiBody = Type.Object({ hashIds: Type.Array(HashId, { maxItems: 30 }) }, { additionalProperties: false });
// the SDK's filters; a filter it leaves null arrives as a bare key, which the query parser drops (no filter)
const Query = Type.Object({
  ...FindQuery.properties,
  deviceHashId: Type.Optional(HashId),
  pinGroupHashId: Type.Optional(HashId),
  edgeHashId: Type.Optional(HashId),
  gridHashId: Type.Optional(HashId),
  mapLayers: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 30 })),
});

const rights = { connectivity: 'ENVIRONMENT_ADMIN' };
const tags = ['command'];

/** A monitoring environment's commands (src/monitoring/links/, wired in src/routes.ts): for the devices it claimed. */
export interface CustomerCommands {
  add(events: CommandEvents, environmentId: number, accountId: number, input: CommandInput): Promise<void>;
  withPinGroups(environmentId: number, rows: { command: { pinGroupHashId: string | null } }[]): Promise<unknown[]>;
}

/**
 * Commands (seed: command add / find / get / delete / deleteMulti). Each lifecycle step is queued
 * as an event for the device type's handler. Monitoring rights (M-SENSORS, M-READ) come with claimed devices.
 */
export async function commandRoutes(fastify: FastifyInstance, ctx: AppContext, openQueue: () => CommandEventQueue, customer?: CustomerCommands): Promise<void> {
  const app = typed(fastify);
  const write = { rights: customer ? { ...rights, monitoring: 'SENSORS' } : rights };
  const read = { rights: customer ? { ...rights, monitoring: 'READ' } : rights };
  const claimed = (request: { account: { environment: { type: string } } }) => customer !== undefined && request.account.environment.type === 'monitoring';
  const queue = openQueue();
  app.addHook('onClose', async () => queue.close());
  const events = queuedCommandEvents(queue, (ids) => announceCommandsAdded(ctx, ids));
  const env = (request: { account: { environment: { id: number } } }) => request.account.environment.id;

  app.post('/command/', { config: write, schema: { tags, summary: 'command add', body: AddBody } }, async (request, reply) => {
    const input = request.body;
    if (claimed(request)) await customer!.add(events, env(request), request.account.id, input);
    else await addCommands(ctx.db, events, env(request), request.account.id, input);
    reply.status(204).send();
  });
  app.get('/command/', { config: read, schema: { tags, summary: 'command find', querystring: Query } }, async (request) => {
    const page = await findCommands(ctx.db, env(request), request.query, claimed(request));
    return claimed(request) ? { nextPageOffset: page.nextPageOffset, rows: await customer!.withPinGroups(env(request), page.rows) } : page;
  });
  app.get('/command/:hashId', { config: read, schema: { tags, summary: 'command get', params: HashIdParams } }, async (request) =>
    getCommand(ctx.db, env(request), request.params.hashId, claimed(request)),
  );
  app.delete('/command/:hashId', { config: write, schema: { tags, summary: 'command delete', params: HashIdParams } }, async (request, reply) => {
    await deleteCommand(ctx.db, events, env(request), request.params.hashId, claimed(request));
    reply.status(204).send();
  });
  app.delete('/command/', { config: write, schema: { tags, summary: 'command deleteMulti', body: DeleteMultiBody } }, async (request) =>
    deleteCommands(ctx.db, events, env(request), request.body.hashIds, claimed(request)),
  );
}
