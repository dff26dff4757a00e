import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../http/typed.ts';
import type { AppContext } from '../app/context.ts';
import { FindQuery } from '../http/schemas.ts';
import { findLog } from './store.ts';

const LogFind = Type.Object({
  ...FindQuery.properties,
  sortBy: Type.Optional(Type.Literal('hashId')),
  objectType: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  objectHashId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
});

/** settings find-log: the audit trail of the caller's environment (AUDIT_TRAIL; a supplier's ENVIRONMENT_ADMIN). */
export async function auditRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/settings/log',
    {
      config: { rights: { monitoring: 'AUDIT_TRAIL', connectivity: 'ENVIRONMENT_ADMIN' } },
      schema: { tags: ['settings'], summary: 'settings find-log', querystring: LogFind },
    },
    async (request) => findLog(ctx.db, request.account.environment.id, request.query),
  );
}
