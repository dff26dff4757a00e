import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { crudRoutes } from '../../http/crud.ts';
import { FieldConfiguration, StringOrTranslations } from '../../http/schemas.ts';
import { MAX_SOURCE_CHARS_CEILING } from '../../sandbox/limits.ts';
import { addReportType, deleteReportType, findReportTypes, getReportType, updateReportType, type ReportTypeInput, type ReportTypePatch } from './store.ts';

const Configurations = Type.Array(FieldConfiguration, { maxItems: 50 });
// update also takes the SDK's `{existingKey, fieldConfiguration}` items
const UpdatableConfigurations = Type.Array(
  Type.Union([
    FieldConfiguration,
    Type.Object({ existingKey: Type.Optional(Type.String()), fieldConfiguration: FieldConfiguration }, { additionalProperties: false }),
  ]),
  { maxItems: 50 },
);
// a stringOrTranslations, as the SDK's report type add and update send it
// the hard ceiling of SANDBOX_MAX_SOURCE_CHARS (src/sandbox/limits.ts); the configured limit is checked on save
const Parser = Type.String({ maxLength: MAX_SOURCE_CHARS_CEILING });

const AddBody = Type.Object(
  {
    name: StringOrTranslations,
    fieldConfigurations: Type.Object({ pinGroup: Configurations, pin: Configurations, measurement: Configurations }, { additionalProperties: false }),
    parser: Parser,
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    name: Type.Optional(StringOrTranslations),
    fieldConfigurations: Type.Optional(
      Type.Partial(Type.Object({ pinGroup: UpdatableConfigurations, pin: UpdatableConfigurations, measurement: UpdatableConfigurations }), {
        additionalProperties: false,
      }),
    ),
    parser: Type.Optional(Parser),
    // the SDK's re-parse of failed reports: accepted, not acted on yet
    retryFailedSince: Type.Optional(Type.String({ format: 'date-time' })),
  },
  { additionalProperties: false },
);

export async function reportTypeRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  crudRoutes<ReportTypeInput, ReportTypePatch>(app, {
    base: '/supplier-report-type/',
    noun: 'supplier-report-type',
    rights: { connectivity: 'ENVIRONMENT_ADMIN' },
    addBody: AddBody,
    updateBody: UpdateBody,
    operations: {
      add: async (env, body) => ({ hashId: await addReportType(ctx.db, env, body, ctx.config.supplierCode) }),
      find: (env, query) => findReportTypes(ctx.db, env, query),
      get: (env, hashId) => getReportType(ctx.db, env, hashId),
      update: (env, hashId, patch) => updateReportType(ctx.db, env, hashId, patch, ctx.config.supplierCode),
      remove: (env, hashId) => deleteReportType(ctx.db, env, hashId),
    },
  });
}
