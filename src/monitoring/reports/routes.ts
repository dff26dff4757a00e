import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { AuthenticationError, ParameterError } from '../../app/errors.ts';
import { ingestReportsJson } from './store.ts';

/** The monitoring core's intake: workers push condition reports here (bearer: the internal token). */
export async function reportIngestRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const expected = Buffer.from(`Bearer ${ctx.keys.internalToken}`);
  await app.register(async (intake) => {
    // the body goes to PostgreSQL as it came: no parse and re-encode of every report here (the app's JSON parser,
    // src/api/app.ts, is replaced in this plugin only)
    intake.removeContentTypeParser('application/json');
    intake.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: 64 * 1024 * 1024 }, (_req, body, done) => done(null, body));
    intake.post('/internal/condition-reports', { config: { apiVersion: false }, schema: { hide: true } }, async (request) => {
      const given = Buffer.from(request.headers.authorization ?? '');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new AuthenticationError('internal token required');
      const body = request.body;
      if (typeof body !== 'string' || !body.startsWith('{"reports":[')) throw new ParameterError('body must be {"reports": [...]}');
      try {
        return { stored: await ingestReportsJson(ctx.db, body) };
      } catch (err) {
        // 22P02/22007/22008/22023: malformed JSON or values that are not what the columns take
        if (/^22/.test((err as { code?: string }).code ?? '')) throw new ParameterError(`reports: ${(err as Error).message}`);
        throw err;
      }
    });
  });
}
