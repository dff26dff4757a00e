import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { addCounterKey, deleteCounterKey, findCounterKeys, getCounterKey, updateCounterKey } from './store.ts';

const Name = Type.String({ minLength: 1, maxLength: 255 });
const AddBody = Type.Object({ name: Name }, { additionalProperties: false });
const UpdateBody = Type.Object({ name: Type.Optional(Name) }, { additionalProperties: false });

export async function counterKeyRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<{ name: string }, { name?: string }>(app, {
    base: '/device-connectivity-counter-key/',
    noun: 'device-connectivity-counter-key',
    rights: { connectivity: 'ENVIRONMENT_ADMIN' },
    addBody: AddBody,
    updateBody: UpdateBody,
    operations: {
      add: async (env, body) => ({ hashId: await addCounterKey(ctx.db, env, body) }),
      find: (env, query) => findCounterKeys(ctx.db, env, query),
      get: (env, hashId) => getCounterKey(ctx.db, env, hashId),
      update: (env, hashId, patch) => updateCounterKey(ctx.db, env, hashId, patch),
      remove: (env, hashId) => deleteCounterKey(ctx.db, env, hashId),
    },
  });
}
