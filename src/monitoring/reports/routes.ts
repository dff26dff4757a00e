import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { AuthenticationError, ParameterError } from '../../app/errors.ts';
import { ingestReports, type ConditionReportIn } from './store.ts';

/** The monitoring core's intake: workers push condition reports here (bearer: the internal token). */
export async function reportIngestRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const expected = Buffer.from(`Bearer ${ctx.keys.internalToken}`);
  app.post('/internal/condition-reports', { config: { apiVersion: false }, schema: { hide: true } }, async (request) => {
    const given = Buffer.from(request.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new AuthenticationError('internal token required');
    const body = request.body as { reports?: ConditionReportIn[] };
    if (!Array.isArray(body?.reports)) throw new ParameterError('reports must be an array');
    return { stored: await ingestReports(ctx.db, body.reports) };
  });
}
