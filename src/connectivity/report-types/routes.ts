import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { FieldConfiguration, FindQuery, HashIdParams } from '../../http/schemas.ts';
import { addReportType, deleteReportType, findReportTypes, getReportType, updateReportType, type ReportTypeInput, type ReportTypePatch } from './store.ts';

const Configurations = Type.Array(FieldConfiguration, { maxItems: 50 });
// update also takes the SDK's `{existingKey, fieldConfiguration}` items
const UpdatableConfigurations = Type.Array(Type.Union([
  FieldConfiguration,
  Type.Object({ existingKey: Type.Optional(Type.String()), fieldConfiguration: FieldConfiguration }, { additionalProperties: false }),
]), { maxItems: 50 });
const Name = Type.String({ minLength: 1, maxLength: 255 });
const Parser = Type.String({ maxLength: 1_000_000 });

const AddBody = Type.Object({
  name: Name,
  fieldConfigurations: Type.Object({ pinGroup: Configurations, pin: Configurations, measurement: Configurations }, { additionalProperties: false }),
  parser: Parser,
}, { additionalProperties: false });
const UpdateBody = Type.Object({
  name: Type.Optional(Name),
  fieldConfigurations: Type.Optional(Type.Partial(Type.Object({ pinGroup: UpdatableConfigurations, pin: UpdatableConfigurations, measurement: UpdatableConfigurations }), { additionalProperties: false })),
  parser: Type.Optional(Parser),
  // the SDK's re-parse of failed reports: accepted, not acted on yet
  retryFailedSince: Type.Optional(Type.String({ format: 'date-time' })),
}, { additionalProperties: false });

const rights = { connectivity: 'ENVIRONMENT_ADMIN' };
const tags = ['supplier-report-type'];
const hashIdOf = (params: unknown) => (params as { hashId: string }).hashId;

export async function reportTypeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  app.post('/supplier-report-type/', { config: { rights }, schema: { tags, summary: 'supplier report type add', body: AddBody } }, async (request) => ({
    hashId: await addReportType(ctx.db, request.account.environment.id, request.body as Static<typeof AddBody> as ReportTypeInput),
  }));
  app.get('/supplier-report-type/', { config: { rights }, schema: { tags, summary: 'supplier report type find', querystring: FindQuery } }, async (request) =>
    findReportTypes(ctx.db, request.account.environment.id, request.query as Static<typeof FindQuery>));
  app.get('/supplier-report-type/:hashId', { config: { rights }, schema: { tags, summary: 'supplier report type get', params: HashIdParams } }, async (request) =>
    getReportType(ctx.db, request.account.environment.id, hashIdOf(request.params)));
  app.post('/supplier-report-type/:hashId', { config: { rights }, schema: { tags, summary: 'supplier report type update', params: HashIdParams, body: UpdateBody } }, async (request, reply) => {
    await updateReportType(ctx.db, request.account.environment.id, hashIdOf(request.params), request.body as Static<typeof UpdateBody> as ReportTypePatch);
    reply.status(204).send();
  });
  app.delete('/supplier-report-type/:hashId', { config: { rights }, schema: { tags, summary: 'supplier report type delete', params: HashIdParams } }, async (request, reply) => {
    await deleteReportType(ctx.db, request.account.environment.id, hashIdOf(request.params));
    reply.status(204).send();
  });
}
