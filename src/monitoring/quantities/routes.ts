import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { FindQuery, HashIdParams, StringOrTranslations, ValuePair } from '../../http/schemas.ts';
import { addQuantity, deleteQuantity, findQuantities, getQuantity, updateQuantity } from './store.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Optional(Type.Union([t, Type.Null()]));
const QuantityBody = Type.Object({
  name: StringOrTranslations,
  color: Type.Optional(Type.String({ pattern: '^#[0-9a-fA-F]{6}$' })),
  unit: Type.String({ maxLength: 32 }),
  defaultOrderOfMagnitude: Type.Integer({ minimum: -128, maximum: 127 }),
  defaultCriticallyLowThreshold: Nullable(ValuePair),
  defaultLowThreshold: Nullable(ValuePair),
  defaultHighThreshold: Nullable(ValuePair),
  defaultCriticallyHighThreshold: Nullable(ValuePair),
  disableSiPrefixes: Type.Optional(Type.Boolean()),
}, { additionalProperties: false });

const read = { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'READ' };
const write = { connectivity: 'ENVIRONMENT_ADMIN', monitoring: 'ENVIRONMENT_ADMIN' };
const tags = ['quantity'];

export async function quantityRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post('/quantity/', { config: { rights: write }, schema: { tags, summary: 'quantity add', body: QuantityBody } }, async (request) => ({
    hashId: await addQuantity(ctx.db, request.account.environment.id, request.body as Static<typeof QuantityBody>),
  }));
  app.get('/quantity/quantities', { config: { rights: read }, schema: { tags, summary: 'quantity find', querystring: FindQuery } }, async (request) =>
    findQuantities(ctx.db, request.account.environment.id, request.query as Static<typeof FindQuery>));
  app.get('/quantity/:hashId', { config: { rights: read }, schema: { tags, summary: 'quantity get', params: HashIdParams } }, async (request) => ({
    quantity: await getQuantity(ctx.db, request.account.environment.id, (request.params as { hashId: string }).hashId),
  }));
  app.post('/quantity/:hashId', { config: { rights: write }, schema: { tags, summary: 'quantity update', params: HashIdParams, body: Type.Partial(QuantityBody) } }, async (request, reply) => {
    await updateQuantity(ctx.db, request.account.environment.id, (request.params as { hashId: string }).hashId, request.body as Partial<Static<typeof QuantityBody>>);
    reply.status(204).send();
  });
  app.delete('/quantity/:hashId', { config: { rights: write }, schema: { tags, summary: 'quantity delete', params: HashIdParams } }, async (request, reply) => {
    await deleteQuantity(ctx.db, request.account.environment.id, (request.params as { hashId: string }).hashId);
    reply.status(204).send();
  });
}
