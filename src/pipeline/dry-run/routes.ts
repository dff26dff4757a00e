import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { HashId, HashIdParams } from '../../http/schemas.ts';
import { MAX_SOURCE_CHARS_CEILING } from '../../sandbox/limits.ts';
import { takeDryRunToken } from './rate.ts';
import { compareDeviceType, compareReportType, COMPARE_MAX_RUNS } from './compare.ts';
import { disposeDryRuns, dryRunDeviceType, dryRunIdentifier, dryRunReportType, type DeviceTypeDryRunInput } from './run.ts';

// the hard ceiling of SANDBOX_MAX_SOURCE_CHARS (src/sandbox/limits.ts); the configured limit is checked by checkSource
const Source = Type.String({ maxLength: MAX_SOURCE_CHARS_CEILING });
const AnyObject = Type.Object({}, { additionalProperties: true });

const LogLine = Type.Object({ type: Type.Union([Type.Literal('log'), Type.Literal('error')]), message: Type.String() });
const RunErrorSchema = Type.Union([
  Type.Null(),
  Type.Object(
    {
      kind: Type.String({ description: 'error, timeout, memory, compile or invalid-result' }),
      message: Type.String(),
      line: Type.Union([Type.Integer(), Type.Null()], {
        description: "in the supplier's TypeScript source; null when the failure has no position (a time or memory limit)",
      }),
      column: Type.Union([Type.Integer(), Type.Null()]),
    },
    { description: 'how the run failed; null when it did not throw' },
  ),
]);
const common = { error: RunErrorSchema, failed: Type.Boolean(), log: Type.Array(LogLine) };

const DeviceTypeBody = Type.Object(
  {
    event: Type.Optional(
      Type.Object(
        {
          type: Type.Union(
            ['incomingRequest', 'newCommand', 'commandDue', 'deletedCommand', 'reportLate', 'link', 'unlink', 'linkUpdate'].map((t) => Type.Literal(t)),
          ),
        },
        { additionalProperties: true, description: 'the event exactly as args.event receives it' },
      ),
    ),
    activityHashId: Type.Optional(Type.String({ ...HashId, description: "a stored run of the device type's handler, whose event is replayed" })),
    eventHandler: Type.Optional(Type.String({ ...Source, description: 'run this source instead of the saved handler (not saved)' })),
    deviceHashId: Type.Optional(
      Type.String({ ...HashId, description: "a device of this type (default: the replayed run's device, or a device with no fields or commands)" }),
    ),
  },
  { additionalProperties: false },
);
const DeviceTypeAnswer = Type.Object({
  answer: Type.Union(
    [Type.Null(), Type.Object({ statusCode: Type.Integer(), headers: Type.Record(Type.String(), Type.String()), body: Type.Union([Type.Null(), AnyObject]) })],
    { description: 'the answer the device would get (null for an event that is not a device request)' },
  ),
  ...common,
  calls: Type.Array(Type.Object({ name: Type.String(), failed: Type.Boolean(), log: Type.Array(LogLine), triggerData: Type.Unknown() }), {
    description:
      'each exec call as its sub-activity would show it: parseReport with the report and its measurements, commands marked, firmware offered, requests that would be sent (none is)',
  }),
});

const ReportTypeBody = Type.Object(
  {
    payload: Type.String({ maxLength: 16 * 1024 * 1024, description: 'as exec.parseReport passes it' }),
    parser: Type.Optional(Type.String({ ...Source, description: 'run this source instead of the saved parser (not saved)' })),
    deviceHashId: Type.Optional(Type.String({ ...HashId, description: 'the device args.device shows' })),
  },
  { additionalProperties: false },
);
const Measurement = Type.Object({
  channelIndex: Type.Integer(),
  channelMeasurementIndex: Type.Integer(),
  quantityHashId: Type.String(),
  generatedAt: Type.String(),
  orderOfMagnitude: Type.Integer(),
  significand: Type.Integer(),
});
const ReportTypeAnswer = Type.Object({
  report: Type.Union([Type.Null(), Type.Object({ generatedAt: Type.String(), fields: Type.Unknown(), measurements: Type.Array(Measurement) })], {
    description: 'the report that would be stored, null when the parser failed',
  }),
  ...common,
});

const IdentifierAnswer = Type.Object({
  result: Type.Union([Type.Null(), Type.Object({ deviceTypeHashId: Type.String(), deviceIdentifier: Type.String() })]),
  device: Type.Union(
    [Type.Null(), Type.Object({ hashId: Type.Union([Type.String(), Type.Null()]), deviceTypeHashId: Type.String(), created: Type.Boolean() })],
    { description: 'the device the answer names: an existing one, or (hashId null, created true) one a real run would create' },
  ),
  ...common,
});
const identifierBody = (member: 'request' | 'certificate', description: string) =>
  Type.Object(
    {
      [member]: Type.Object({}, { additionalProperties: true, description }),
      identifier: Type.Optional(Type.String({ ...Source, description: 'run this source instead of the saved identifier (not saved)' })),
    },
    { additionalProperties: false },
  );

const CompareBody = Type.Object(
  {
    eventHandler: Type.String({ ...Source, description: 'the proposed source (not saved); compiled first, as a save compiles it' }),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: COMPARE_MAX_RUNS, default: COMPARE_MAX_RUNS, description: 'how many of the last stored device requests to replay' }),
    ),
  },
  { additionalProperties: false },
);
const CompareAnswer = Type.Object({
  runs: Type.Array(
    Type.Object({
      activityHashId: Type.String({ description: "the stored run whose event (the device's request) both runs replay" }),
      deviceHashId: Type.Union([Type.String(), Type.Null()], {
        description: 'its device (null once deleted: the runs then use a device of the type with no fields or commands)',
      }),
      createdAt: Type.String(),
      current: DeviceTypeAnswer,
      proposed: DeviceTypeAnswer,
      differs: Type.Object({
        answer: Type.Boolean({ description: 'the answer the device would get' }),
        reports: Type.Boolean({ description: 'the parseReport calls: report type, payload, fields, whether each failed' }),
        measurements: Type.Boolean({
          description:
            'the measurements of those reports by channel, index, quantity and value (not their generatedAt, which a parser may take from its clock)',
        }),
        failed: Type.Boolean({ description: 'one run failed and the other did not' }),
      }),
    }),
  ),
  summary: Type.Object({
    total: Type.Integer({ description: 'runs compared' }),
    differing: Type.Integer({ description: 'runs with any difference' }),
    newlyFailing: Type.Integer({ description: 'the current handler succeeds, the proposed one fails' }),
    fixed: Type.Integer({ description: 'the current handler fails, the proposed one succeeds' }),
  }),
});
const COMPARE_DESCRIPTION =
  `The device type's last \`limit\` (at most ${COMPARE_MAX_RUNS}) stored runs of its event handler on a device request, each dry-run twice: with the saved handler (current) and with the body's eventHandler (proposed), ` +
  "on the run's device as it is now. Newest first; runs stored cut short (ACTIVITY_MAX_BYTES) are left out. A proposed source that does not compile is 400 parameter_error naming eventHandler " +
  'with its line and column, as a save answers it (and it counts against SANDBOX_COMPILES_PER_MINUTE like a save). Nothing is stored, changed or sent. ' +
  "One compare takes one dry run from the environment's bucket (DRY_RUN_BURST, DRY_RUNS_PER_MINUTE: 429 rate_limit_error); its runs go four stored requests at a time, " +
  "each run within the sandbox's limits (SANDBOX_TIMEOUT_MS), so a compare lasts at most about limit / 4 x 2 x SANDBOX_TIMEOUT_MS.";

const ReportCompareBody = Type.Object(
  {
    parser: Type.String({ ...Source, description: 'the proposed source (not saved); compiled first, as a save compiles it' }),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: COMPARE_MAX_RUNS, default: COMPARE_MAX_RUNS, description: 'how many of the last parsed payloads to replay' }),
    ),
  },
  { additionalProperties: false },
);
const ReportCompareAnswer = Type.Object({
  runs: Type.Array(
    Type.Object({
      activityHashId: Type.String({ description: 'the stored run whose exec.parseReport call gave the payload' }),
      subActivityHashId: Type.String({ description: "that parseReport call's sub-activity" }),
      deviceHashId: Type.Union([Type.String(), Type.Null()], {
        description: 'its device, shown to both parsers as args.device (null once deleted: a device with no fields)',
      }),
      createdAt: Type.String(),
      current: ReportTypeAnswer,
      proposed: ReportTypeAnswer,
      differs: Type.Object({
        reports: Type.Boolean({ description: 'the report: whether there is one, and its fields' }),
        measurements: Type.Boolean({
          description: 'its measurements by channel, index, quantity and value (not their generatedAt, which a parser may take from its clock)',
        }),
        failed: Type.Boolean({ description: 'one run failed and the other did not' }),
      }),
    }),
  ),
  summary: CompareAnswer.properties.summary,
});
const REPORT_COMPARE_DESCRIPTION =
  `The payloads of the report type's last \`limit\` (at most ${COMPARE_MAX_RUNS}) parseReport calls among the environment's last 5000 activities, newest first, each dry-run twice: ` +
  "with the saved parser (current) and with the body's parser (proposed). Payloads stored cut short (ACTIVITY_MAX_BYTES) are left out. A proposed parser that does not compile is 400 parameter_error " +
  "naming parser with its line and column, as a save answers it. Nothing is stored, changed or sent. One compare takes one dry run from the environment's bucket (DRY_RUN_BURST, DRY_RUNS_PER_MINUTE).";

const rights = { connectivity: 'ENVIRONMENT_ADMIN' } as const;
const environmentOf = (request: FastifyRequest) => ({ id: request.account.environment.id, hashId: request.account.environment.hashId });
const NOTHING_CHANGES = 'Nothing is stored, changed or sent. Rate limited per environment (DRY_RUN_BURST, DRY_RUNS_PER_MINUTE: 429 rate_limit_error).';

/** The dry-run operations, one beside each resource whose supplier code they run. */
export async function dryRunRoutes(untyped: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(untyped);
  app.addHook('onClose', async () => disposeDryRuns(ctx));
  // `body` is each route's own schema: its type B is named at the route, so the one cast is here
  const route = <B>(
    path: string,
    tag: string,
    summary: string,
    body: TSchema,
    answer: TSchema,
    run: (request: FastifyRequest, hashId: string, body: B) => Promise<unknown>,
  ) => {
    app.post(
      path,
      { config: { rights }, schema: { tags: [tag], summary, description: NOTHING_CHANGES, params: HashIdParams, body, response: { 200: answer } } },
      async (request) => {
        await takeDryRunToken(ctx, request.account.environment.hashId);
        return run(request, request.params.hashId, request.body as B);
      },
    );
  };
  route<DeviceTypeDryRunInput>(
    '/device-type/:hashId/dry-run',
    'device-type',
    "device-type dry run: the event handler on a sample event or a stored run's, for a device of the type",
    DeviceTypeBody,
    DeviceTypeAnswer,
    (request, hashId, body) => dryRunDeviceType(ctx, environmentOf(request), hashId, body),
  );
  app.post(
    '/device-type/:hashId/compare',
    {
      config: { rights },
      schema: {
        tags: ['device-type'],
        summary: 'device-type compare: the saved and a proposed event handler on the last stored device requests',
        description: COMPARE_DESCRIPTION,
        params: HashIdParams,
        body: CompareBody,
        response: { 200: CompareAnswer },
      },
    },
    async (request) => {
      await takeDryRunToken(ctx, request.account.environment.hashId);
      return compareDeviceType(ctx, environmentOf(request), request.params.hashId, request.body);
    },
  );
  app.post(
    '/supplier-report-type/:hashId/compare',
    {
      config: { rights },
      schema: {
        tags: ['supplier-report-type'],
        summary: 'supplier-report-type compare: the saved and a proposed parser on the last parsed payloads',
        description: REPORT_COMPARE_DESCRIPTION,
        params: HashIdParams,
        body: ReportCompareBody,
        response: { 200: ReportCompareAnswer },
      },
    },
    async (request) => {
      await takeDryRunToken(ctx, request.account.environment.hashId);
      return compareReportType(ctx, environmentOf(request), request.params.hashId, request.body);
    },
  );
  route<{ payload: string; parser?: string; deviceHashId?: string }>(
    '/supplier-report-type/:hashId/dry-run',
    'supplier-report-type',
    'supplier-report-type dry run: the parser on a payload',
    ReportTypeBody,
    ReportTypeAnswer,
    (request, hashId, body) => dryRunReportType(ctx, environmentOf(request), hashId, body),
  );
  route<{ request: Record<string, unknown>; identifier?: string }>(
    '/supplier-webhook/:hashId/dry-run',
    'supplier-webhook',
    'supplier-webhook dry run: the identifier on a request',
    identifierBody('request', 'the request exactly as args.request receives it'),
    IdentifierAnswer,
    (request, hashId, body) => dryRunIdentifier(ctx, environmentOf(request), 'webhook', hashId, body),
  );
  route<{ certificate: Record<string, unknown>; identifier?: string }>(
    '/supplier-certificate/:hashId/dry-run',
    'supplier-certificate',
    'supplier-certificate dry run: the identifier on a device certificate',
    identifierBody('certificate', 'the certificate exactly as args.certificate receives it: { subjects }'),
    IdentifierAnswer,
    (request, hashId, body) => dryRunIdentifier(ctx, environmentOf(request), 'certificate', hashId, body),
  );
}
