import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { findSuggestions, SUGGESTION_TYPES, type SuggestionType } from './store.ts';

const Query = Type.Object({
  // the SDK requires it, but sends the empty search as `search=`, which reads as no parameter: absent is ''
  search: Type.Optional(Type.String({ maxLength: 255 })),
  type: Type.Unsafe<SuggestionType>({ type: 'string', enum: SUGGESTION_TYPES }),
  locale: Type.Optional(Type.Union([Type.Literal('en'), Type.Literal('nl')])),
  rowsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
  // the last value of the previous page, not a sealed nextPageOffset
  offset: Type.Optional(Type.String({ maxLength: 1024 })),
});

/** suggestions find: GET /suggestions/ (values of a field for a search box). */
export async function suggestionRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  app.get(
    '/suggestions/',
    {
      config: { rights: { monitoring: 'READ', connectivity: 'ENVIRONMENT_ADMIN' }, offsetIsValue: true },
      schema: { tags: ['suggestions'], summary: 'suggestions find', querystring: Query },
    },
    async (request) => findSuggestions(ctx.db, request.account.environment.id, request.query),
  );
}
