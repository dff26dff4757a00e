import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { HashId, HashIdParams } from '../../http/schemas.ts';
import { takeDryRunToken } from './rate.ts';
import { disposeDryRuns, dryRunDeviceType, dryRunIdentifier, dryRunReportType, type DeviceTypeDryRunInput } from './run.ts';

const Source = Type.String({ maxLength: 1_000_000 });
const AnyObject = Type.Object({}, { additionalProperties: true });

const LogLine = Type.Object({ type: Type.Union([Type.Literal('log'), Type.Literal('error')]), message: Type.String() });
const RunErrorSchema = Type.Union([Type.Null(), Type.Object({
  kind: Type.String({ description: 'error, timeout, memory, compile or invalid-result' }),
  message: Type.String(),
  line: Type.Union([Type.Integer(), Type.Null()], { description: "in the supplier's TypeScript source; null when the failure has no position (a time or memory limit)" }),
  column: Type.Union([Type.Integer(), Type.Null()]),
}, { description: 'how the run failed; null when it did not throw' })]);
const common = { error: RunErrorSchema, failed: Type.Boolean(), log: Type.Array(LogLine) };

const DeviceTypeBody = Type.Object({
  event: Type.Optional(Type.Object({
    type: Type.Union(['incomingRequest', 'newCommand', 'commandDue', 'deletedCommand', 'reportLate', 'link', 'unlink', 'linkUpdate'].map((t) => Type.Literal(t))),
  }, { additionalProperties: true, description: 'the event exactly as args.event receives it' })),
  activityHashId: Type.Optional(Type.String({ ...HashId, description: "a stored run of the device type's handler, whose event is replayed" })),
  eventHandler: Type.Optional(Type.String({ ...Source, description: 'run this source instead of the saved handler (not saved)' })),
  deviceHashId: Type.Optional(Type.String({ ...HashId, description: 'a device of this type (default: the replayed run\'s device, or a device with no fields or commands)' })),
}, { additionalProperties: false });
const DeviceTypeAnswer = Type.Object({
  answer: Type.Union([Type.Null(), Type.Object({ statusCode: Type.Integer(), headers: Type.Record(Type.String(), Type.String()), body: Type.Union([Type.Null(), AnyObject]) })],
    { description: "the answer the device would get (null for an event that is not a device request)" }),
  ...common,
  calls: Type.Array(Type.Object({ name: Type.String(), failed: Type.Boolean(), log: Type.Array(LogLine), triggerData: Type.Unknown() }),
    { description: 'each exec call as its sub-activity would show it: parseReport with the report and its measurements, commands marked, firmware offered, requests that would be sent (none is)' }),
});

const ReportTypeBody = Type.Object({
  payload: Type.String({ maxLength: 16 * 1024 * 1024, description: 'as exec.parseReport passes it' }),
  parser: Type.Optional(Type.String({ ...Source, description: 'run this source instead of the saved parser (not saved)' })),
  deviceHashId: Type.Optional(Type.String({ ...HashId, description: 'the device args.device shows' })),
}, { additionalProperties: false });
const Measurement = Type.Object({
  channelIndex: Type.Integer(), channelMeasurementIndex: Type.Integer(), quantityHashId: Type.String(), generatedAt: Type.String(), orderOfMagnitude: Type.Integer(), significand: Type.Integer(),
});
const ReportTypeAnswer = Type.Object({
  report: Type.Union([Type.Null(), Type.Object({ generatedAt: Type.String(), fields: Type.Unknown(), measurements: Type.Array(Measurement) })], { description: 'the report that would be stored, null when the parser failed' }),
  ...common,
});

const IdentifierAnswer = Type.Object({
  result: Type.Union([Type.Null(), Type.Object({ deviceTypeHashId: Type.String(), deviceIdentifier: Type.String() })]),
  device: Type.Union([Type.Null(), Type.Object({ hashId: Type.Union([Type.String(), Type.Null()]), deviceTypeHashId: Type.String(), created: Type.Boolean() })],
    { description: 'the device the answer names: an existing one, or (hashId null, created true) one a real run would create' }),
  ...common,
});
const identifierBody = (member: 'request' | 'certificate', description: string) => Type.Object({
  [member]: Type.Object({}, { additionalProperties: true, description }),
  identifier: Type.Optional(Type.String({ ...Source, description: 'run this source instead of the saved identifier (not saved)' })),
}, { additionalProperties: false });

const rights = { connectivity: 'ENVIRONMENT_ADMIN' } as const;
const environmentOf = (request: FastifyRequest) => ({ id: request.account.environment.id, hashId: request.account.environment.hashId });
const NOTHING_CHANGES = 'Nothing is stored, changed or sent. Rate limited per environment (DRY_RUN_BURST, DRY_RUNS_PER_MINUTE: 429 rate_limit_error).';

/** The dry-run operations, one beside each resource whose supplier code they run. */
export async function dryRunRoutes(untyped: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(untyped);
  app.addHook('onClose', async () => disposeDryRuns(ctx));
  // `body` is each route's own schema: its type B is named at the route, so the one cast is here
  const route = <B>(path: string, tag: string, summary: string, body: TSchema, answer: TSchema, run: (request: FastifyRequest, hashId: string, body: B) => Promise<unknown>) => {
    app.post(path, { config: { rights }, schema: { tags: [tag], summary, description: NOTHING_CHANGES, params: HashIdParams, body, response: { 200: answer } } }, async (request) => {
      await takeDryRunToken(ctx, request.account.environment.hashId);
      return run(request, request.params.hashId, request.body as B);
    });
  };
  route<DeviceTypeDryRunInput>('/device-type/:hashId/dry-run', 'device-type', 'device-type dry run: the event handler on a sample event or a stored run\'s, for a device of the type',
    DeviceTypeBody, DeviceTypeAnswer, (request, hashId, body) => dryRunDeviceType(ctx, environmentOf(request), hashId, body));
  route<{ payload: string; parser?: string; deviceHashId?: string }>('/supplier-report-type/:hashId/dry-run', 'supplier-report-type', 'supplier-report-type dry run: the parser on a payload',
    ReportTypeBody, ReportTypeAnswer, (request, hashId, body) => dryRunReportType(ctx, environmentOf(request), hashId, body));
  route<{ request: Record<string, unknown>; identifier?: string }>('/supplier-webhook/:hashId/dry-run', 'supplier-webhook', 'supplier-webhook dry run: the identifier on a request',
    identifierBody('request', 'the request exactly as args.request receives it'), IdentifierAnswer, (request, hashId, body) => dryRunIdentifier(ctx, environmentOf(request), 'webhook', hashId, body));
  route<{ certificate: Record<string, unknown>; identifier?: string }>('/supplier-certificate/:hashId/dry-run', 'supplier-certificate', 'supplier-certificate dry run: the identifier on a device certificate',
    identifierBody('certificate', 'the certificate exactly as args.certificate receives it: { subjects }'), IdentifierAnswer, (request, hashId, body) => dryRunIdentifier(ctx, environmentOf(request), 'certificate', hashId, body));
}
