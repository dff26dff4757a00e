import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import swagger from '@fastify/swagger';
import qs from 'qs';
import type { AppContext } from '../app/context.ts';
import { ApiVersionError, OutdatedClientError } from '../app/errors.ts';
import type { Account } from '../app/account.ts';
import { authenticate } from '../accounts/authenticate.ts';
import { authorize } from '../http/rights.ts';
import { errorHandler } from '../http/errors.ts';
import { shapeForVersion } from '../http/versions.ts';
import { openOffset, sealOffset } from '../http/paging.ts';
import { checkInput, validationOptions } from '../http/validation.ts';
import { asAuthor } from '../app/author.ts';

/**
 * Api-Version policy: every version from the oldest to the newest is served, each with the shapes of the
 * original SDK's versioned models (src/http/versions.ts). Older than the oldest: 403 outdated_client_error
 * (the key that SDK looks for); newer than the newest: 400 api_version_error.
 */
export const SUPPORTED_API_VERSIONS = [4, 5, 6, 7, 8];
const OLDEST = SUPPORTED_API_VERSIONS[0];
const NEWEST = SUPPORTED_API_VERSIONS[SUPPORTED_API_VERSIONS.length - 1];
const CHANGING_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Bracket notation as qs parses it. A key without a value (`&edgeHashId&mapLayers`, how the original SDK
 * sends a null filter) or with an empty one means "no filter": it is left out, so defaults apply.
 */
function parseQuery(search: string): Record<string, unknown> {
  const parsed = qs.parse(search, { depth: 10, arrayLimit: 10_000 }) as Record<string, unknown>;
  for (const [key, value] of Object.entries(parsed)) if (value === '') delete parsed[key];
  return parsed;
}

function checkApiVersion(raw: string | string[] | undefined): number {
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined || !/^\d+$/.test(value)) throw new ApiVersionError('Header Api-Version is required and must be an integer, e.g. Api-Version: 5');
  const version = Number(value);
  if (version < OLDEST) throw new OutdatedClientError(`Api-Version ${version} is no longer supported; use ${OLDEST} to ${NEWEST}`);
  if (version > NEWEST) throw new ApiVersionError(`Api-Version ${version} is not supported; use ${OLDEST} to ${NEWEST}`);
  return version;
}

/** The REST API's Fastify instance with headers, auth and errors as hooks; features register routes on it. */
export async function createHttpApp(ctx: AppContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log.child({ role: 'api' }) as unknown as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // `/quantity` finds the SDK's `/quantity/` (and the other way round): no route differs only by its last slash
    routerOptions: { querystringParser: parseQuery, ignoreTrailingSlash: true },
    bodyLimit: 16 * 1024 * 1024,
    ...validationOptions(),
    // the router's own refusals (an undecodable path, a path parameter over 100 characters) get keyed bodies too
    frameworkErrors: (err, _request, reply) => {
      const message = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is longer than 100 characters' : 'the URL path is not valid';
      (reply as FastifyReply).status(400).send({ key: 'parameter_error', message });
    },
  });
  app.decorateRequest('account', null as unknown as Account);
  app.decorateRequest('apiVersion', 0);
  // `Accept: text/json` and `Content-Type: text/json` work like application/json; an empty body with a JSON
  // Content-Type (a DELETE or GET sent with the headers every other call carries) is no body, not an error
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser(['application/json', 'text/json'], { parseAs: 'string' }, (request, body, done) => {
    if (body === '') {
      done(null, undefined);
      return;
    }
    json(request, body as string, done);
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send({ key: 'not_found_error', message: `No operation ${request.method} ${request.url.split('?')[0]}` });
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Asset monitoring and device connectivity API',
        version: String(NEWEST),
        description:
          `Every operation needs the header Api-Version, ${OLDEST} to ${NEWEST}; each version answers with the shapes ` +
          'of the original platform SDK release that sends it: names of quantities, device types and command types are plain strings ' +
          'up to 6 and may be translation objects from 7; a quantity\'s unit may be null from 8 (answered as "-" before). ' +
          `Older than ${OLDEST}: 403 outdated_client_error; newer than ${NEWEST}: 400 api_version_error. ` +
          'Environment-scoped operations need Environment-Hash-Id (a bare hashId, or supplier:<hashId> for a connectivity environment). ' +
          'Errors are {key, message}. Find operations page with an opaque keyset nextPageOffset; an empty query parameter (`?edgeHashId&search=`) means no filter.',
      },
      components: { securitySchemes: { 'jwt-token': { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } } },
      security: [{ 'jwt-token': [] }],
    },
  });

  // the audit trail: every changing operation of an account runs as that account's, so each write it makes is
  // logged in the write's own transaction (src/app/author.ts); routes registered later, by any feature, included
  app.addHook('onRoute', (route) => {
    const methods = ([] as string[]).concat(route.method);
    if (!ctx.config.auditLog || !methods.some((m) => CHANGING_METHODS.has(m))) return;
    const handler = route.handler;
    route.handler = function audited(this: FastifyInstance, request, reply) {
      const account = request.account as Account | null;
      if (!account || !CHANGING_METHODS.has(request.method)) return handler.call(this, request, reply);
      return asAuthor({ environmentId: account.environment.id, userHashId: account.hashId }, () => handler.call(this, request, reply));
    };
  });

  app.addHook('onRequest', async (request) => {
    const config = request.routeOptions.config;
    if (config.apiVersion === false || request.is404) return;
    const query = (config.headersFromQuery ? request.query : {}) as { apiVersion?: unknown; environmentHashId?: unknown };
    const fromQuery = (value: unknown) => (typeof value === 'string' ? value : undefined);
    request.apiVersion = checkApiVersion(request.headers['api-version'] ?? fromQuery(query.apiVersion));
    const mode = config.auth ?? 'environment';
    if (mode === 'none') return;
    request.account = await authenticate(ctx, request);
    if (mode === 'environment') {
      const header = request.headers['environment-hash-id'] ?? fromQuery(query.environmentHashId);
      authorize(request.account, Array.isArray(header) ? header[0] : header, config.rights);
    }
  });

  // answers in the shapes of the request's Api-Version (names, units, ... of older SDK releases)
  app.addHook('preSerialization', async (request, _reply, payload) => (request.apiVersion ? shapeForVersion(payload, request.apiVersion) : payload));
  // hostile text and nesting are refused before any schema or handler sees them (src/http/validation.ts)
  app.addHook('preValidation', async (request) => {
    const maxDepth = ctx.config.jsonMaxDepth;
    checkInput(request.params, 'path', maxDepth);
    checkInput(request.query, 'query', maxDepth);
    checkInput(request.body, 'body', maxDepth);
  });
  // find offsets travel sealed (src/http/paging.ts)
  app.addHook('preHandler', async (request) => {
    const query = request.query as { offset?: unknown } | undefined;
    if (request.routeOptions.config.offsetIsValue) return;
    if (query && typeof query.offset === 'string' && query.offset !== '') query.offset = openOffset(ctx.keys.pagingOffset, request, query.offset);
  });
  app.addHook('preSerialization', async (request, _reply, payload: unknown) => {
    const page = payload as { nextPageOffset?: unknown } | null;
    if (page === null || typeof page !== 'object' || typeof page.nextPageOffset !== 'string') return payload;
    return { ...page, nextPageOffset: sealOffset(ctx.keys.pagingOffset, request, page.nextPageOffset) };
  });

  app.get('/openapi.json', { config: { apiVersion: false }, schema: { hide: true } }, async () => app.swagger());
  return app;
}
