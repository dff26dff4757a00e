import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { encodeUint } from '../../src/coap/message.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { DtlsCoapPeer } from '../coap/support.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, environmentClient, type RestClient } from '../support/provision.ts';
import { JSON_REPORT_HANDLER, ok } from './linked-device.ts';

// The issue's proof, from the outside: a supplier makes a device and a claim token, a customer
// claims it, builds a pin group with two pins and links the device; the device reports over
// HTTPS TLS-PSK and over CoAP/DTLS, and the customer reads the values back with measurement find.
// After unlink a new report is not on the pin group; after unclaim the customer no longer sees the device.

const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const d = JSON.parse(args.payload) as { t: number; v: number; c: number };
  return {
    generatedAt: new Date(d.t),
    measurements: [
      { channelIndex: 0, quantityHashId: VOLTAGE, generatedAt: new Date(d.t), orderOfMagnitude: -3, significand: d.v },
      { channelIndex: 1, quantityHashId: CURRENT, generatedAt: new Date(d.t), orderOfMagnitude: -6, significand: d.c },
    ],
  };
}`;

interface Row {
  report: {
    hashId: string;
    generatedAt: string;
    reportTypeHashId: string;
    pinObservations: {
      measurement: { pinHashId: string; channelIndex: number; significand: number; orderOfMagnitude: number; reportHashId: string };
      quantityHashId: string;
    }[];
  } | null;
  pinGroup: { hashId: string; name: string };
  pin: { hashId: string; name: string };
  edge: null;
}

let ctx: AppContext;
let service: RunningService;
let supplier: RestClient;
let customer: RestClient;
const device = { identity: `e2e-${randomBytes(4).toString('hex')}`, key: randomBytes(16), hashId: '' };
const ids = { voltage: '', current: '', reportType: '', pinGroup: '', pinA: '', pinB: '' };

const monitoringClient = (baseUrl: string): Promise<RestClient> =>
  environmentClient(ctx.db, baseUrl, 'monitoring', 'water utility', ['READ', 'STATIC', 'SENSORS']);

let clock = Date.parse('2026-10-01T00:00:00Z');
/** A report with its own generatedAt, so each one can be found alone by time range. */
const nextReport = (v: number, c: number) => ({ t: (clock += 60_000), v, c });

async function overHttps(data: { t: number; v: number; c: number }): Promise<void> {
  const out = await opensslPsk({
    port: service.https!.port(),
    identity: device.identity,
    keyHex: device.key.toString('hex'),
    input: httpRequestText('POST', '/report', JSON.stringify(data)),
  });
  expect(parseHttpResponse(out.stdout).status).toBe(200);
}

let messageId = 1;
async function overCoap(data: { t: number; v: number; c: number }): Promise<void> {
  const peer = await DtlsCoapPeer.connect(service.coap!.coapsPort(), device.identity, device.key);
  try {
    const answer = await peer.exchange({
      code: 'POST',
      messageId: messageId++,
      token: randomBytes(4),
      options: [
        { name: 'Uri-Path', value: Buffer.from('report') },
        { name: 'Content-Format', value: encodeUint(50) },
      ],
      payload: Buffer.from(JSON.stringify(data)),
    });
    expect(answer.code).toBe('2.05');
  } finally {
    peer.close();
  }
}

/** The customer's measurement rows of the report generated at `t`. */
async function rowsAt(t: number, extra = ''): Promise<Row[]> {
  const since = new Date(t).toISOString();
  const before = new Date(t + 1).toISOString();
  const r = await customer.request<{ rows: Row[]; nextPageOffset: string | null }>(
    'GET',
    `/measurement/?pinGroupHashIds[0]=${ids.pinGroup}&since=${since}&before=${before}&rowsPerPage=50&includePinsWithoutReports=false${extra}`,
  );
  return ok(r).rows;
}

/**
 * Reports until one lands on the pins. A link reaches the workers' device cache before it is
 * answered (link-propagation.test.ts proves the first report lands); the loop only bounds the wait.
 */
async function reportUntilOnPins(send: (d: { t: number; v: number; c: number }) => Promise<void>, v: number, c: number) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const data = nextReport(v, c);
    await send(data);
    const rows = await rowsAt(data.t);
    if (rows.length > 0) return { data, rows };
    if (Date.now() > deadline) throw new Error('no report reached the pins');
    await new Promise((r) => setTimeout(r, 300));
  }
}

beforeAll(async () => {
  ctx = await testContext({ SANDBOX_TIMEOUT_MS: '1000' });
  service = await startService(ctx, ['all']);
  const base = `http://127.0.0.1:${service.apiPort()}`;
  supplier = await connectivityClient(ctx.db, base);
  customer = await monitoringClient(base);
  ids.voltage = ok(await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: -3 })).hashId;
  ids.current = ok(await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Current', unit: 'A', defaultOrderOfMagnitude: -6 })).hashId;
  ids.reportType = ok(
    await supplier.request<{ hashId: string }>('POST', '/supplier-report-type/', {
      name: 'CP report',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser: `const VOLTAGE = "${ids.voltage}";\nconst CURRENT = "${ids.current}";\n${PARSER}`,
    }),
  ).hashId;
  const type = ok(
    await supplier.request<{ hashId: string }>('POST', '/device-type/', {
      name: 'CP logger',
      eventHandler: `const REPORT_TYPE = "${ids.reportType}";\n${JSON_REPORT_HANDLER}`,
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [
        { name: 'Pipe', defaultPinName: 'Pipe', pinFieldConfigurations: [] },
        { name: 'Anode', defaultPinName: 'Anode', pinFieldConfigurations: [] },
      ],
      commandTypeHashIds: [],
    }),
  ).hashId;
  device.hashId = ok(
    await supplier.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: device.identity,
      deviceTypeHashId: type,
      psk: device.key.toString('hex'),
      pskIdentity: device.identity,
    }),
  ).hashId;
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

describe('device → gateway → handler → parser → the pins of a customer location', () => {
  it('claim, pin group with two pins, link; reports over TLS-PSK and CoAP/DTLS land on the pins; unlink; unclaim', async () => {
    const token = ok(await supplier.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [device.hashId] }))
      .claimTokens[0].claimToken;
    expect(
      ok(await customer.request<{ devices: { hashId: string }[] }>('POST', '/device/claim', { claimTokens: [token] })).devices.map((d) => d.hashId),
    ).toEqual([device.hashId]);

    ids.pinGroup = ok(
      await customer.request<{ hashId: string }>('POST', '/graph/pin-group', {
        symbolKey: 'test-post',
        geometry: { type: 'Point', coordinates: [6.56, 53.21] },
        fields: { id: 'Test post 14' },
      }),
    ).hashId;
    ids.pinA = ok(await customer.request<{ pin: { hashId: string } }>('POST', `/graph/pin-group/${ids.pinGroup}/pin`, { fields: { id: 'Pipe' } })).pin.hashId;
    ids.pinB = ok(await customer.request<{ pin: { hashId: string } }>('POST', `/graph/pin-group/${ids.pinGroup}/pin`, { fields: { id: 'Anode' } })).pin.hashId;
    ok(
      await customer.request('POST', `/device/${device.hashId}/link`, {
        pinGroupHashId: ids.pinGroup,
        channelMapping: [
          { channel: 0, pinHashId: ids.pinA },
          { channel: 1, pinHashId: ids.pinB },
        ],
      }),
    );

    // over HTTPS TLS-PSK
    const https = await reportUntilOnPins(overHttps, -850, 1200);
    const byPin = new Map(https.rows.map((r) => [r.pin.hashId, r]));
    expect([...byPin.keys()].sort()).toEqual([ids.pinA, ids.pinB].sort());
    const a = byPin.get(ids.pinA)!;
    expect(a.pinGroup).toEqual({ hashId: ids.pinGroup, name: 'Test post 14' });
    expect(a.pin.name).toBe('Pipe');
    expect(a.report).toMatchObject({ generatedAt: new Date(https.data.t).toISOString(), reportTypeHashId: ids.reportType });
    expect(a.report!.pinObservations).toEqual([
      {
        quantityHashId: ids.voltage,
        measurement: expect.objectContaining({ pinHashId: ids.pinA, channelIndex: 0, significand: -850, orderOfMagnitude: -3, reportHashId: a.report!.hashId }),
      },
    ]);
    expect(byPin.get(ids.pinB)!.report!.pinObservations).toEqual([
      { quantityHashId: ids.current, measurement: expect.objectContaining({ pinHashId: ids.pinB, channelIndex: 1, significand: 1200, orderOfMagnitude: -6 }) },
    ]);

    // over CoAP/DTLS (the link is known to the worker by now)
    const coap = nextReport(-910, 1500);
    await overCoap(coap);
    const coapRows = await rowsAt(coap.t);
    expect(coapRows.map((r) => [r.pin.hashId, r.report!.pinObservations[0].measurement.significand]).sort()).toEqual(
      [
        [ids.pinA, -910],
        [ids.pinB, 1500],
      ].sort(),
    );

    // by pin, by quantity, paged
    const onlyA = await rowsAt(coap.t, `&pinHashIds[0]=${ids.pinA}`);
    expect(onlyA.map((r) => r.pin.hashId)).toEqual([ids.pinA]);
    const currentOnly = await rowsAt(coap.t, `&quantityHashIds[0]=${ids.current}`);
    expect(currentOnly.map((r) => r.pin.hashId)).toEqual([ids.pinB]);
    const seen: string[] = [];
    let offset: string | null = null;
    do {
      const page: { rows: Row[]; nextPageOffset: string | null } = ok(
        await customer.request(
          'GET',
          `/measurement/?pinHashIds=${ids.pinA}&quantityHashIds=${ids.voltage}&sortBy=generatedAt&descending=false&rowsPerPage=1${offset ? `&offset=${offset}` : ''}`,
        ),
      );
      expect(page.rows.length).toBeLessThanOrEqual(1);
      seen.push(...page.rows.map((r) => r.report!.generatedAt));
      offset = page.nextPageOffset;
    } while (offset);
    expect(seen.slice(-2)).toEqual([new Date(https.data.t).toISOString(), new Date(coap.t).toISOString()]);
    expect([...seen].sort()).toEqual(seen);

    const pg = ok(await customer.request<{ pinGroup: { mostRecentMeasurementAt: string } }>('GET', `/graph/pin-group/${ids.pinGroup}`));
    expect(pg.pinGroup.mostRecentMeasurementAt).toBe(new Date(coap.t).toISOString());
    // another customer reads none of it
    const other = await monitoringClient(`http://127.0.0.1:${service.apiPort()}`);
    expect(ok(await other.request<{ rows: Row[] }>('GET', `/measurement/?pinHashIds=${ids.pinA}`)).rows).toEqual([]);

    // unlink: the next report is stored for the supplier but is on no pin
    expect((await customer.request('POST', `/device/${device.hashId}/unlink`)).status).toBe(204);
    const later = nextReport(-999, 1);
    await overHttps(later);
    expect(await rowsAt(later.t)).toEqual([]);
    const stored = await ctx.db.query<{ pin_group_id: number | null; pins: number }>(
      `SELECT r.pin_group_id, (SELECT count(*) FROM measurement m WHERE m.report_id = r.id AND m.pin_id IS NOT NULL)::int AS pins
         FROM condition_report r JOIN device d ON d.id = r.device_id WHERE d.hash_id = $1 AND r.generated_at = $2`,
      [device.hashId, new Date(later.t)],
    );
    expect(stored.rows).toEqual([{ pin_group_id: null, pins: 0 }]);
    // what was on the pins stays there
    expect(await rowsAt(coap.t)).toHaveLength(2);

    // unclaim: the customer no longer sees the device
    expect((await customer.request('POST', '/device/unclaim', { hashIds: [device.hashId] })).status).toBe(204);
    expect(ok(await customer.request<{ rows: unknown[] }>('GET', '/device/')).rows).toEqual([]);
    expect((await customer.request('GET', `/device/${device.hashId}`)).status).toBe(404);
    expect(ok(await supplier.request<{ environmentHashId: string | null }>('GET', `/device/${device.hashId}`)).environmentHashId).toBeNull();
  });
});
