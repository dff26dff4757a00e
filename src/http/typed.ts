import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Static, TSchema } from '@sinclair/typebox';
import type { FastifyBaseLogger, FastifyInstance, FastifyTypeProvider } from 'fastify';

/**
 * Fastify's type provider for TypeBox: a route's `request.body`, `query` and `params` have the types of the schemas
 * it declares (validated before the handler runs), so a handler needs no cast. Answers stay untyped: the response
 * schemas serialise and document them.
 */
export interface TypeBoxProvider extends FastifyTypeProvider {
  validator: this['schema'] extends TSchema ? Static<this['schema']> : unknown;
  serializer: unknown;
}

/** The app as route modules declare their routes on. */
export type TypedApp = FastifyInstance<Server, IncomingMessage, ServerResponse, FastifyBaseLogger, TypeBoxProvider>;

/** `app` with request types taken from the route schemas (a type-level view: the same instance). */
export const typed = (app: FastifyInstance): TypedApp => app.withTypeProvider<TypeBoxProvider>();
