import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { HashId } from '../../http/schemas.ts';
import { readRights } from '../graph-schemas.ts';
import { pinQuantities } from './store.ts';

/** graph get-pin-quantities: GET /graph/pin-quantities/:pinHashId. */
export async function pinQuantityRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/graph/pin-quantities/:pinHashId',
    {
      config: { rights: readRights },
      schema: { tags: ['pin'], summary: 'pin quantities get', params: Type.Object({ pinHashId: HashId }) },
    },
    async (request) => pinQuantities(ctx.db, request.account.environment.id, request.params.pinHashId),
  );
}
