import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { liveActivityChannel, liveStreamsKey } from '../../src/app/redis-keys.ts';
import { EventStream } from '../../src/connectivity/live/event-stream.ts';
import { openEventStream } from '../support/sse.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { tempDir } from '../pki/support.ts';
import { until, waitFor } from '../support/until.ts';

// The live log (GET /supplier-activity/stream) against the whole service in one process: a real device over HTTPS
// TLS-PSK, the worker storing its activity and publishing the notice on Redis, the API streaming it as an event.

let ctx: AppContext;
let service: RunningService;
let base: string;
const MAX_STREAMS = 3;

beforeAll(async () => {
  ctx = await testContext({ CERTS_DIR: tempDir(), LIVE_LOG_STREAMS_PER_ENVIRONMENT: String(MAX_STREAMS) });
  service = await startService(ctx, ['all']);
  base = `http://127.0.0.1:${service.apiPort()}`;
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

interface Supplier {
  environmentHashId: string;
  environmentId: number;
  jwt: string;
  api<T = Record<string, string>>(method: string, url: string, body?: unknown): Promise<{ status: number; body: T }>;
}
interface Device {
  hashId: string;
  typeHashId: string;
  identity: string;
  key: string;
}

async function supplier(): Promise<Supplier> {
  const env = await createEnvironment(ctx.db, 'connectivity', 'live');
  const account = await createMachineAccount(ctx.db, env.hashId, ['ENVIRONMENT_ADMIN']);
  const login = await fetch(`${base}/authentication/machine-login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '5' },
    body: JSON.stringify({ assertion: account.assertion }),
  });
  const { jwt } = (await login.json()) as { jwt: string };
  const { rows } = await ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [env.hashId]);
  return {
    environmentHashId: env.hashId,
    environmentId: Number(rows[0].id),
    jwt,
    async api(method, url, body) {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: {
          'api-version': '5',
          'environment-hash-id': env.hashId,
          authorization: `Bearer ${jwt}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
  };
}

const PARSER = (quantityHashId: string) => `function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as { volts: number[] };
  return { generatedAt: new Date(), measurements: data.volts.map((v, i) => ({ channelIndex: i, quantityHashId: '${quantityHashId}', orderOfMagnitude: -3, significand: Math.round(v * 1000) })) };
}`;

const HANDLER = (reportTypeHashId: string) => `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  exec.addLog('report received');
  exec.parseReport({ reportTypeHashId: '${reportTypeHashId}', payload: JSON.stringify((args.event.webRequest.body as { data: unknown }).data) });
  return { statusCode: 200, body: { ok: true } };
}`;

/** A device type whose handler parses the body as a report, and one PSK device of it. */
async function device(s: Supplier): Promise<Device> {
  const quantity = await s.api<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0 });
  const reportType = await s.api<{ hashId: string }>('POST', '/supplier-report-type/', {
    name: 'volts',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: PARSER(quantity.body.hashId),
  });
  const type = await s.api<{ hashId: string }>('POST', '/device-type/', {
    name: `type ${randomBytes(3).toString('hex')}`,
    eventHandler: HANDLER(reportType.body.hashId),
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'A', pinFieldConfigurations: [] }],
    commandTypeHashIds: [],
  });
  expect(type.status).toBe(200);
  const d = { identity: `dev-${randomBytes(6).toString('hex')}`, key: randomBytes(16).toString('hex') };
  const added = await s.api<{ hashId: string }>('POST', '/device/psk', {
    supplierDeviceIdentifier: d.identity,
    deviceTypeHashId: type.body.hashId,
    psk: d.key,
    pskIdentity: d.identity,
  });
  expect(added.status).toBe(200);
  return { ...d, hashId: added.body.hashId, typeHashId: type.body.hashId };
}

/** A real device request over HTTPS TLS-PSK. */
async function report(d: Device, volts: number[]) {
  const out = await opensslPsk({
    port: service.https!.port(),
    identity: d.identity,
    keyHex: d.key,
    input: httpRequestText('POST', '/report', JSON.stringify({ volts })),
  });
  return parseHttpResponse(out.stdout);
}

/** An open stream read as it arrives (test/support/sse.ts), its `activity` events parsed. */
async function openStream(s: Supplier, query = '', headers: Record<string, string> = { 'api-version': '5', 'environment-hash-id': s.environmentHashId }) {
  const stream = await openEventStream(`${base}/supplier-activity/stream${query}`, { authorization: `Bearer ${s.jwt}`, ...headers });
  return { ...stream, events: () => stream.events('activity') };
}

const subscribers = async (environmentId: number) =>
  Number(((await ctx.redis.pubsub('NUMSUB', liveActivityChannel(ctx.config, environmentId))) as [string, number])[1]);

describe('live log', () => {
  it("streams a device request's activity as it is stored, with its request, answer, report and duration; another environment's stream gets none of it", async () => {
    const a = await supplier();
    const b = await supplier();
    const [deviceA, deviceB] = await Promise.all([device(a), device(b)]);
    const streamA = await openStream(a);
    // B's stream through the query parameters an EventSource can send
    const streamB = await openStream(b, `?apiVersion=5&environmentHashId=${b.environmentHashId}`, {});
    expect(streamA.status).toBe(200);
    expect(streamA.contentType).toBe('text/event-stream; charset=utf-8');
    expect(streamB.status).toBe(200);

    expect((await report(deviceA, [1.5, 2])).status).toBe(200);
    await waitFor(() => streamA.events().length === 1, 15_000);
    const [event] = streamA.events();
    const stored = await a.api<Record<string, unknown>>('GET', `/supplier-activity/${event.id}`);
    expect(stored.status).toBe(200);
    // the shape supplier activity get answers, with the run's duration beside it
    const { durationMs, ...shape } = event.data;
    expect(shape).toEqual(stored.body);
    expect(durationMs).toEqual(expect.any(Number));
    const activity = event.data.activity as {
      hashId: string;
      createdAt: string;
      failed: boolean;
      log: unknown[];
      triggerData: { request: { request: { body: unknown }; response: { statusCode: number; body: unknown } } };
      activities: { triggerType: string; triggerData: { observations: { measurement: { significand: number } }[] } }[];
    };
    expect(event.data).toMatchObject({ device: { hashId: deviceA.hashId }, deviceType: { hashId: deviceA.typeHashId } });
    expect(activity).toMatchObject({ hashId: event.id, failed: false, log: [{ type: 'log', message: 'report received' }] });
    expect(Date.parse(activity.createdAt)).not.toBeNaN();
    expect(activity.triggerData.request.request.body).toEqual({ type: 'json', data: { volts: [1.5, 2] } });
    expect(activity.triggerData.request.response).toMatchObject({ statusCode: 200, body: { type: 'json', data: { ok: true } } });
    expect(activity.activities[0].triggerType).toBe('parseReport');
    expect(activity.activities[0].triggerData.observations.map((o) => o.measurement.significand)).toEqual([1500, 2000]);

    // B's own request reaches B's stream; A's never did, nor does B's reach A's (A's next event comes after B's was published)
    expect((await report(deviceB, [3])).status).toBe(200);
    await waitFor(() => streamB.events().length === 1, 15_000);
    expect((await report(deviceA, [4])).status).toBe(200);
    await waitFor(() => streamA.events().length === 2, 15_000);
    expect(streamB.events().map((e) => (e.data.device as { hashId: string }).hashId)).toEqual([deviceB.hashId]);
    expect(streamA.events().map((e) => (e.data.device as { hashId: string }).hashId)).toEqual([deviceA.hashId, deviceA.hashId]);
    // nothing else on B's stream: its retry field and its one event
    expect(streamB.blocks.filter((blk) => blk.comment !== 'keepalive')).toEqual([{ retry: '3000' }, expect.objectContaining({ event: 'activity' })]);
    expect(streamA.blocks[0]).toEqual({ retry: '3000' });

    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(Number(/^gridgate_live_log_delay_seconds_count (\d+)/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(3);

    streamA.close();
    streamB.close();
    // the streams' channels are left and their leases given back once the clients are gone
    await until(
      () => Promise.all([subscribers(a.environmentId), subscribers(b.environmentId)]),
      (n) => n[0] === 0 && n[1] === 0,
      'no subscription left',
    );
    await until(
      () => ctx.redis.zcard(liveStreamsKey(ctx.config, a.environmentHashId)),
      (n) => n === 0,
      'no lease left',
    );
  });

  it("filters by device and device type; an unknown device (or another environment's) is a 404", async () => {
    const a = await supplier();
    const b = await supplier();
    const [one, two, other] = await Promise.all([device(a), device(a), device(b)]);
    const byDevice = await openStream(a, `?deviceHashId=${two.hashId}`);
    const byType = await openStream(a, `?deviceTypeHashId=${one.typeHashId}`);
    expect((await report(one, [1])).status).toBe(200);
    await waitFor(() => byType.events().length === 1, 15_000);
    expect((await report(two, [2])).status).toBe(200);
    await waitFor(() => byDevice.events().length === 1, 15_000);
    expect(byDevice.events().map((e) => (e.data.device as { hashId: string }).hashId)).toEqual([two.hashId]);
    expect(byType.events().map((e) => (e.data.device as { hashId: string }).hashId)).toEqual([one.hashId]);
    byDevice.close();
    byType.close();

    const unknown = await openStream(a, `?deviceHashId=${other.hashId}`);
    expect(unknown.status).toBe(404);
    expect((await openStream(a, `?deviceTypeHashId=${other.typeHashId}`)).status).toBe(404);
  });

  it('takes the headers from the query on this operation only, with the same authentication and environment checks', async () => {
    const a = await supplier();
    const b = await supplier();
    // no Api-Version anywhere
    expect((await openStream(a, `?environmentHashId=${a.environmentHashId}`, {})).status).toBe(400);
    // another environment's hashId is one that does not exist
    expect((await openStream(a, `?apiVersion=5&environmentHashId=${b.environmentHashId}`, {})).status).toBe(404);
    // no token
    const anonymous = await fetch(`${base}/supplier-activity/stream?apiVersion=5&environmentHashId=${a.environmentHashId}`);
    expect(anonymous.status).toBe(401);
    await anonymous.text();
    // the find operation still wants its headers
    const find = await fetch(`${base}/supplier-activity/?apiVersion=5&environmentHashId=${a.environmentHashId}`, {
      headers: { authorization: `Bearer ${a.jwt}` },
    });
    expect(find.status).toBe(400);
    await find.text();
  });

  it(`holds at most LIVE_LOG_STREAMS_PER_ENVIRONMENT streams of one environment open (${MAX_STREAMS} here): one more is 429 until one closes`, async () => {
    const a = await supplier();
    const b = await supplier();
    const open = await Promise.all(Array.from({ length: MAX_STREAMS }, () => openStream(a)));
    expect(open.map((s) => s.status)).toEqual(Array(MAX_STREAMS).fill(200));
    const refused = await fetch(`${base}/supplier-activity/stream`, {
      headers: { authorization: `Bearer ${a.jwt}`, 'api-version': '5', 'environment-hash-id': a.environmentHashId },
    });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { key: string }).key).toBe('rate_limit_error');
    // another environment's streams are its own
    const other = await openStream(b);
    expect(other.status).toBe(200);
    other.close();
    // one subscription per environment however many streams: the process's one subscriber connection
    expect(await subscribers(a.environmentId)).toBe(1);

    open[0].close();
    await until(
      () => ctx.redis.zcard(liveStreamsKey(ctx.config, a.environmentHashId)),
      (n) => n === MAX_STREAMS - 1,
      "the closed stream's lease given back",
    );
    const again = await openStream(a);
    expect(again.status).toBe(200);
    for (const s of [...open.slice(1), again]) s.close();
    await until(
      () => subscribers(a.environmentId),
      (n) => n === 0,
      'no subscription left',
    );
  });
});

describe('event stream', () => {
  it('sends retry first, then a keepalive comment each period (renewing the lease), and ends once when the client goes', async () => {
    let renewals = 0;
    let ends = 0;
    let stream: EventStream | null = null;
    const server = createServer((_req, res) => {
      stream = new EventStream(
        res,
        () => {
          renewals++;
        },
        50,
      );
      stream.onEnd(() => {
        ends++;
      });
      stream.send('activity', 'abc', '{"n":1}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const abort = new AbortController();
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { signal: abort.signal });
      expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = '';
      while ((text.match(/: keepalive\n\n/g) ?? []).length < 2) text += (await reader.read()).value ?? '';
      expect(text.startsWith('retry: 3000\n\nevent: activity\nid: abc\ndata: {"n":1}\n\n: keepalive\n\n: keepalive\n\n')).toBe(true);
      expect(renewals).toBeGreaterThanOrEqual(2);
      abort.abort();
      await waitFor(() => stream?.ended === true);
      expect(ends).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
