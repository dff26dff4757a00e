import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { AppContext } from '../../src/app/context.ts';
import type { RunningService } from '../../src/service.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, environmentClient, type RestClient } from '../support/provision.ts';

// A supplier's one-channel device, claimed by a customer and linked to a pin group with one pin,
// reporting a value of one quantity (orderOfMagnitude 0) over HTTPS TLS-PSK.

const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const d = JSON.parse(args.payload) as { t: number; v: number };
  return { generatedAt: new Date(d.t), measurements: [{ channelIndex: 0, quantityHashId: QUANTITY, generatedAt: new Date(d.t), orderOfMagnitude: 0, significand: d.v }] };
}`;

/** An event handler that parses a JSON body as a report of the report type REPORT_TYPE (prepend `const REPORT_TYPE = ...`) and answers 200. */
export const JSON_REPORT_HANDLER = `
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  if (body === undefined || body.type !== 'json') return { statusCode: 400 };
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(body.data) });
  return { statusCode: 200, body: { ok: true } };
}`;

export const ok = <T>(r: { status: number; body: T }): T => {
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};

export interface LinkedDevice {
  supplier: RestClient;
  customer: RestClient;
  quantityHashId: string;
  deviceHashId: string;
  deviceTypeHashId: string;
  pinGroupHashId: string;
  pinHashId: string;
  /** reports value `v` with a generatedAt later than every earlier report's; resolves when the device got its answer */
  report(v: number): Promise<number>;
  /** reports until a report lands on the pin (a worker learns of a new link within a bounded time) */
  reportUntilOnPin(v: number): Promise<void>;
}

let clock = Date.parse('2026-10-01T00:00:00Z');

export async function linkedDevice(
  ctx: AppContext,
  service: RunningService,
  customerRights: string[],
  quantity: Record<string, unknown> = {},
): Promise<LinkedDevice> {
  const base = `http://127.0.0.1:${service.apiPort()}`;
  const supplier = await connectivityClient(ctx.db, base);
  const customer = await environmentClient(ctx.db, base, 'monitoring', 'customer', customerRights);
  const quantityHashId = ok(
    await supplier.request<{ hashId: string }>('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: 0, ...quantity }),
  ).hashId;
  const reportType = ok(
    await supplier.request<{ hashId: string }>('POST', '/supplier-report-type/', {
      name: 'report',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser: `const QUANTITY = "${quantityHashId}";\n${PARSER}`,
    }),
  ).hashId;
  const deviceTypeHashId = ok(
    await supplier.request<{ hashId: string }>('POST', '/device-type/', {
      name: 'logger',
      eventHandler: `const REPORT_TYPE = "${reportType}";\n${JSON_REPORT_HANDLER}`,
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [{ name: 'Pipe', defaultPinName: 'Pipe', pinFieldConfigurations: [] }],
      commandTypeHashIds: [],
    }),
  ).hashId;
  const identity = `thr-${randomBytes(5).toString('hex')}`;
  const key = randomBytes(16);
  const deviceHashId = ok(
    await supplier.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: identity,
      deviceTypeHashId,
      psk: key.toString('hex'),
      pskIdentity: identity,
    }),
  ).hashId;
  const token = ok(await supplier.request<{ claimTokens: { claimToken: string }[] }>('POST', '/device/claim-tokens', { deviceHashIds: [deviceHashId] }))
    .claimTokens[0].claimToken;
  ok(await customer.request('POST', '/device/claim', { claimTokens: [token] }));
  const pinGroupHashId = ok(
    await customer.request<{ hashId: string }>('POST', '/graph/pin-group', { symbolKey: 'post', geometry: null, fields: { id: 'Post 1' } }),
  ).hashId;
  const pinHashId = ok(await customer.request<{ pin: { hashId: string } }>('POST', `/graph/pin-group/${pinGroupHashId}/pin`, { fields: { id: 'Pipe' } })).pin
    .hashId;
  ok(await customer.request('POST', `/device/${deviceHashId}/link`, { pinGroupHashId, channelMapping: [{ channel: 0, pinHashId }] }));

  const report = async (v: number): Promise<number> => {
    const t = (clock += 60_000);
    const out = await opensslPsk({
      port: service.https!.port(),
      identity,
      keyHex: key.toString('hex'),
      input: httpRequestText('POST', '/report', JSON.stringify({ t, v })),
    });
    expect(parseHttpResponse(out.stdout).status).toBe(200);
    return t;
  };
  const onPin = async (t: number) => {
    const since = new Date(t).toISOString();
    const before = new Date(t + 1).toISOString();
    const r = ok(await customer.request<{ rows: unknown[] }>('GET', `/measurement/?pinHashIds[0]=${pinHashId}&since=${since}&before=${before}`));
    return r.rows.length > 0;
  };
  return {
    supplier,
    customer,
    quantityHashId,
    deviceHashId,
    deviceTypeHashId,
    pinGroupHashId,
    pinHashId,
    report,
    async reportUntilOnPin(v) {
      const deadline = Date.now() + 20_000;
      for (;;) {
        if (await onPin(await report(v))) return;
        if (Date.now() > deadline) throw new Error('no report reached the pin');
        await new Promise((r) => setTimeout(r, 300));
      }
    },
  };
}
