import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../app/context.ts';
import { REPORT_DATE_RULE } from '../../sandbox/report-dates.ts';
import { Fields, FindQuery, HashId, HashIdParams } from '../../http/schemas.ts';
import { typed } from '../../http/typed.ts';
import { FieldsUpdate, readRights } from '../graph-schemas.ts';
import { addReport, deleteReport, MAX_REPORT_MEASUREMENTS, updateReport, type Evaluation } from './manual.ts';
import { findReports, getReport } from './view.ts';

const reportRights = { monitoring: 'REPORTS' };
const tags = ['report'];

// a report's and a measurement's time: inside the window every report's time is kept in (src/sandbox/report-dates.ts)
const ReportTime = Type.String({ format: 'date-time', description: `ISO 8601, ${REPORT_DATE_RULE}` });
// a value as the SDK's measurement takes it: significand x 10^orderOfMagnitude
const Value = {
  generatedAt: ReportTime,
  orderOfMagnitude: Type.Integer({ minimum: -128, maximum: 127 }),
  significand: Type.Integer({ minimum: -2147483648, maximum: 2147483647 }),
  doNotCompareToThresholds: Type.Optional(Type.Boolean()),
};
const NewMeasurement = Type.Object({ pinHashId: HashId, quantityHashId: HashId, ...Value }, { additionalProperties: false });
const UpdatedMeasurement = Type.Object({ measurementHashId: HashId, ...Value }, { additionalProperties: false });

const AddBody = Type.Object(
  {
    generatedAt: Type.Optional(ReportTime),
    measurements: Type.Array(NewMeasurement, { maxItems: MAX_REPORT_MEASUREMENTS }),
    reportTypeHashId: HashId,
    pinGroupHashId: HashId,
    fields: Type.Optional(Fields),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    generatedAt: Type.Optional(ReportTime),
    measurements: Type.Optional(Type.Array(Type.Union([UpdatedMeasurement, NewMeasurement]), { maxItems: MAX_REPORT_MEASUREMENTS })),
    fields: Type.Optional(FieldsUpdate),
  },
  { additionalProperties: false },
);
const OptionalHashId = Type.Optional(Type.Union([HashId, Type.Null()]));
const FindReports = Type.Object({
  ...FindQuery.properties,
  sortBy: Type.Optional(Type.Literal('generatedAt')),
  pinGroupHashId: OptionalHashId,
  edgeHashId: OptionalHashId,
  gridHashId: OptionalHashId,
  mapLayers: Type.Optional(Type.Union([Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 100 }), Type.Null()])),
});

/** Condition reports of a monitoring environment (the SDK's report routes): read with READ; manual ones entered, changed and deleted with REPORTS. */
export async function reportRoutes(untyped: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(untyped);
  const evaluation: Evaluation = { enabled: ctx.config.thresholdEvaluation, log: ctx.log, cache: ctx.thresholds };
  const env = (request: FastifyRequest) => request.account.environment;

  app.post('/report/', { config: { rights: reportRights }, schema: { tags, summary: 'report add', body: AddBody } }, async (request) =>
    addReport(ctx.db, env(request), { id: request.account.id, name: request.account.name }, request.body, evaluation),
  );
  app.get('/report/', { config: { rights: readRights }, schema: { tags, summary: 'report find', querystring: FindReports } }, async (request) =>
    findReports(ctx.db, env(request).id, request.query),
  );
  app.get('/report/:hashId', { config: { rights: readRights }, schema: { tags, summary: 'report get', params: HashIdParams } }, async (request) =>
    getReport(ctx.db, env(request).id, request.params.hashId),
  );
  app.post(
    '/report/:hashId',
    { config: { rights: reportRights }, schema: { tags, summary: 'report update', params: HashIdParams, body: UpdateBody } },
    async (request) => updateReport(ctx.db, env(request), request.params.hashId, request.body, evaluation),
  );
  app.delete(
    '/report/:hashId',
    { config: { rights: reportRights }, schema: { tags, summary: 'report delete', params: HashIdParams } },
    async (request, reply) => {
      await deleteReport(ctx.db, env(request).id, request.params.hashId);
      reply.status(204).send();
    },
  );
}
