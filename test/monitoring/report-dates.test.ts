import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, environmentClient, pskDevice, type RestClient } from '../support/provision.ts';

// The times a report and its measurements may carry (src/sandbox/report-dates.ts: from 2000-01-01, up to 1 day ahead),
// from each way a report comes in: an import, a manual report, a supplier's report parser run by a device's request.
// Reports and measurements are partitioned by week on that time: a time outside the window would make partitions.

let ctx: AppContext;
let service: RunningService;
let base: string;

beforeAll(async () => {
  ctx = await testContext();
  service = await startService(ctx, ['all']);
  base = `http://127.0.0.1:${service.apiPort()}`;
});
afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

const ok = <T>(r: { status: number; body: T }): T => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};
const DAY_MS = 24 * 3600_000;
/** `days` from now, as an ISO string */
const inDays = (days: number) => new Date(Date.now() + days * DAY_MS).toISOString();

interface Place {
  c: RestClient;
  pinGroupHashId: string;
  pinHashId: string;
  reportTypeHashId: string;
  quantityHashId: string;
}

/** A monitoring environment with a pin group, its pin, and a manual report type of one quantity. */
async function place(): Promise<Place> {
  const c = await environmentClient(ctx.db, base, 'monitoring', 'dates', ['READ', 'STATIC', 'REPORTS', 'IMPORT', 'USERS', 'ENVIRONMENT_ADMIN']);
  const pinGroupHashId = ok(
    await c.request<{ hashId: string }>('POST', '/graph/pin-group', { symbolKey: 'cp-rectifier', geometry: null, fields: { id: 'station' } }),
  ).hashId;
  const pinHashId = ok(await c.request<{ pin: { hashId: string } }>('POST', `/graph/pin-group/${pinGroupHashId}/pin`, { fields: { id: 'inlet' } })).pin.hashId;
  const reportTypeHashId = ok(
    await c.request<{ hashId: string }>('POST', '/report-type/', {
      name: 'Inspection',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      quantities: [{ name: 'Potential', unit: 'V' }],
    }),
  ).hashId;
  const quantityHashId = ok(await c.request<{ quantities: { hashId: string }[] }>('GET', `/report-type/${reportTypeHashId}`)).quantities[0].hashId;
  return { c, pinGroupHashId, pinHashId, reportTypeHashId, quantityHashId };
}

/** The environment's stored measurements' times, oldest first. */
async function storedTimes(c: RestClient): Promise<string[]> {
  const { rows } = await ctx.db.query<{ at: Date }>(
    'SELECT m.generated_at AS at FROM measurement m JOIN environment e ON e.id = m.environment_id WHERE e.hash_id = $1 ORDER BY m.generated_at',
    [c.environmentHashId],
  );
  return rows.map((r) => r.at.toISOString());
}

const HEADER = 'pinGroupHashId,pinGroupName,pinHashId,pinName,reportTypeHashId,reportTypeName,generatedAt,quantityHashId,orderOfMagnitude,significand';

describe('import-request add', () => {
  const upload = (p: Place, times: string[]) =>
    p.c.request<{ importRequest: { state: string; errors: string[] | null } }>('POST', '/import/', {
      name: 'history',
      dataUrl: `data:text/csv;base64,${Buffer.from([HEADER, ...times.map((t) => `${p.pinGroupHashId},,${p.pinHashId},,${p.reportTypeHashId},,${t},${p.quantityHashId},0,1`)].join('\r\n')).toString('base64')}`,
    });

  it('refuses a line dated before 2000-01-01 or more than a day ahead, naming line and column, and imports nothing of the file', async () => {
    const p = await place();
    // one a week from 1900: 2,000 weeks, each of which would become a partition
    const weekly = Array.from({ length: 2000 }, (_, i) => new Date(Date.UTC(1900, 0, 1) + i * 7 * DAY_MS).toISOString());
    const ancient = ok(await upload(p, weekly)).importRequest;
    expect(ancient.state).toBe('invalid');
    expect(ancient.errors?.[0]).toBe(
      'line 2, generatedAt: 1900-01-01T00:00:00.000Z lies before 2000-01-01T00:00:00.000Z, the earliest time a report may carry',
    );
    expect(ancient.errors).toHaveLength(101);
    expect(ancient.errors?.[100]).toBe('... and 1900 more');

    const ahead = inDays(2);
    const mixed = ok(await upload(p, ['2000-01-01T00:00:00Z', '1999-12-31T23:59:59Z', ahead, '2004-05-06T07:08:09Z'])).importRequest;
    expect(mixed.state).toBe('invalid');
    expect(mixed.errors).toHaveLength(2);
    expect(mixed.errors?.[0]).toBe('line 3, generatedAt: 1999-12-31T23:59:59Z lies before 2000-01-01T00:00:00.000Z, the earliest time a report may carry');
    expect(mixed.errors?.[1]).toMatch(new RegExp(`^line 4, generatedAt: ${ahead} lies more than 1 day ahead \\(after `));
    expect(await storedTimes(p.c)).toEqual([]);

    // historic readings from the window's first moment on, and a device clock hours ahead, are imported
    const soon = inDays(0.5);
    expect(ok(await upload(p, ['2000-01-01T00:00:00Z', '2004-05-06T07:08:09Z', soon])).importRequest).toMatchObject({ state: 'success', errors: null });
    expect(await storedTimes(p.c)).toEqual(['2000-01-01T00:00:00.000Z', '2004-05-06T07:08:09.000Z', soon]);
  });
});

describe('manual reports', () => {
  it('refuses a report or measurement dated before 2000-01-01 or more than a day ahead with 400 parameter_error naming the field; stores nothing of it', async () => {
    const p = await place();
    const measurement = (generatedAt: string) => ({
      pinHashId: p.pinHashId,
      quantityHashId: p.quantityHashId,
      generatedAt,
      orderOfMagnitude: 0,
      significand: 1,
    });
    const add = (body: Record<string, unknown>) =>
      p.c.request('POST', '/report/', { reportTypeHashId: p.reportTypeHashId, pinGroupHashId: p.pinGroupHashId, measurements: [], ...body });
    expectParameterError(
      await add({ measurements: [measurement('2020-01-01T00:00:00Z'), measurement('1900-01-01T00:00:00Z')] }),
      'measurements[1].generatedAt',
      '1900-01-01T00:00:00Z',
      'lies before 2000-01-01',
    );
    expectParameterError(
      await add({ generatedAt: '1999-12-31T23:59:59Z', measurements: [measurement('2020-01-01T00:00:00Z')] }),
      'generatedAt 1999-12-31T23:59:59Z',
      'lies before 2000-01-01',
    );
    expectParameterError(await add({ measurements: [measurement(inDays(2))] }), 'measurements[0].generatedAt', 'more than 1 day ahead');
    expect(await storedTimes(p.c)).toEqual([]);

    const hashId = ok((await add({ measurements: [measurement('2000-01-01T00:00:00Z')] })) as { status: number; body: { hashId: string } }).hashId;
    expectParameterError(
      await p.c.request('POST', `/report/${hashId}`, { generatedAt: '0001-01-01T00:00:00Z' }),
      'generatedAt 0001-01-01T00:00:00Z',
      'lies before 2000-01-01',
    );
    expectParameterError(
      await p.c.request('POST', `/report/${hashId}`, { measurements: [measurement(inDays(3))] }),
      'measurements[0].generatedAt',
      'more than 1 day ahead',
    );
    expect(await storedTimes(p.c)).toEqual(['2000-01-01T00:00:00.000Z']);
    expect(ok(await p.c.request<{ generatedAt: string }>('GET', `/report/${hashId}`)).generatedAt).toBe('2000-01-01T00:00:00.000Z');
  });

  it('states the window in the API description of generatedAt', async () => {
    const res = await fetch(`${base}/openapi.json`);
    const spec = (await res.json()) as {
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: { properties: Record<string, { description?: string }> } }> } }>
      >;
    };
    const body = spec.paths['/report/']?.post?.requestBody?.content['application/json'].schema;
    expect(body?.properties.generatedAt.description).toContain('not before 2000-01-01T00:00:00.000Z and at most 1 day after');
  });
});

describe("a supplier's report parser", () => {
  it("fails the run's parseReport visibly, naming the date, when a report or measurement lies outside the window; the device is answered and its next report is stored", async () => {
    const supplier = await connectivityClient(ctx.db, base);
    const quantity = ok(await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0 })).hashId;
    const reportType = ok(
      await supplier.request<{ hashId: string }>('POST', '/supplier-report-type/', {
        name: 'dated',
        fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
        parser: `const Q = "${quantity}";
function handle(args: { payload: string }, exec: Exec) {
  const at = args.payload === 'ancient' ? new Date('1900-01-01T00:00:00Z') : args.payload === 'ahead' ? new Date(Date.now() + 3 * 86400000) : new Date();
  const measuredAt = args.payload === 'old-measurement' ? new Date('1999-06-01T00:00:00Z') : at;
  return { generatedAt: at, measurements: [{ channelIndex: 0, quantityHashId: Q, generatedAt: measuredAt, orderOfMagnitude: 0, significand: 1 }] };
}`,
      }),
    ).hashId;
    const device = await pskDevice(
      supplier,
      `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const path = args.event.webRequest.url.path.slice(1);
  // the handler's own generatedAt overrides the parser's
  if (path === 'handler-ancient') exec.parseReport({ reportTypeHashId: "${reportType}", payload: 'now', generatedAt: new Date('1900-01-01T00:00:00Z') });
  else exec.parseReport({ reportTypeHashId: "${reportType}", payload: path });
  return { statusCode: 200, body: { ok: true } };
}`,
    );
    const port = service.https!.port();
    type Sub = { triggerType: string; failed: boolean; log: { type: string; message: string }[] };
    const parseOf = async (payload: string): Promise<Sub> => {
      const out = await opensslPsk({
        port,
        identity: device.identity,
        keyHex: device.key.toString('hex'),
        input: httpRequestText('POST', `/${payload}`, '{}'),
      });
      expect(parseHttpResponse(out.stdout).status).toBe(200);
      const rows = ok(
        await supplier.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?rowsPerPage=100&deviceHashId=${device.hashId}`),
      ).rows;
      const activities = await Promise.all(
        rows.map(
          async (r) =>
            ok(
              await supplier.request<{ activity: { triggerData: { request: { request: { url: { path: string } } } }; activities: Sub[] } }>(
                'GET',
                `/supplier-activity/${r.activity.hashId}`,
              ),
            ).activity,
        ),
      );
      const found = activities.filter((a) => a.triggerData.request?.request?.url.path === `/${payload}`);
      expect(found).toHaveLength(1);
      return found[0].activities[0];
    };
    const errors = (s: Sub) => s.log.filter((l) => l.type === 'error').map((l) => l.message);
    const reports = async () =>
      (
        await ctx.db.query<{ at: Date }>('SELECT r.generated_at AS at FROM condition_report r JOIN device d ON d.id = r.device_id WHERE d.hash_id = $1', [
          device.hashId,
        ])
      ).rows;

    const ancient = await parseOf('ancient');
    expect(ancient).toMatchObject({ triggerType: 'parseReport', failed: true });
    expect(errors(ancient)).toEqual([
      'invalid-result: generatedAt 1900-01-01T00:00:00.000Z lies before 2000-01-01T00:00:00.000Z, the earliest time a report may carry',
    ]);
    const old = await parseOf('old-measurement');
    expect(old.failed).toBe(true);
    expect(errors(old)).toEqual([
      'invalid-result: measurements[0].generatedAt 1999-06-01T00:00:00.000Z lies before 2000-01-01T00:00:00.000Z, the earliest time a report may carry',
    ]);
    const ahead = await parseOf('ahead');
    expect(ahead.failed).toBe(true);
    expect(errors(ahead)[0]).toMatch(/^invalid-result: generatedAt \S+ lies more than 1 day ahead \(after /);
    const handlerDated = await parseOf('handler-ancient');
    expect(handlerDated.failed).toBe(true);
    expect(errors(handlerDated)).toEqual([
      'generatedAt 1900-01-01T00:00:00.000Z given to exec.parseReport lies before 2000-01-01T00:00:00.000Z, the earliest time a report may carry',
    ]);
    expect(await reports()).toEqual([]);

    expect((await parseOf('now')).failed).toBe(false);
    await expect.poll(async () => (await reports()).length).toBe(1);
  });
});
