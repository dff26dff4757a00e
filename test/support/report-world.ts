import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { Queryable } from '../../src/app/db.ts';
import type { RestClient } from './provision.ts';
import { pskHttpRequest } from './psk-client.ts';

/** Every report's payload is `{"d":<device>,"seq":<n>}`: stored payloads can be matched with what was sent. */
const PARSER = `function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as { seq: number };
  return { generatedAt: new Date(), measurements: [{ channelIndex: 0, quantityHashId: QUANTITY, generatedAt: new Date(), orderOfMagnitude: 0, significand: data.seq }] };
}`;
const HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const until = Date.now() + BUSY_MS; while (Date.now() < until) {}
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(args.event.webRequest.body?.data) });
  return { statusCode: 200, body: { ok: true } };
}`;

export interface ReportingDevice {
  identity: string;
  key: Buffer;
  hashId: string;
}

/**
 * A quantity, a report type, a device type whose handler parses every request body as a report (after `busyMs` of
 * busy work), and `n` PSK devices.
 */
export async function reportingDevices(api: RestClient, n: number, busyMs = 0): Promise<ReportingDevice[]> {
  const ok = <T>(r: { status: number; body: T }, what: string): T => {
    if (r.status !== 200) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const quantity = ok(await api.request('POST', '/quantity/', { name: 'Sequence', unit: '1', defaultOrderOfMagnitude: 0 }), 'quantity');
  const reportType = ok(
    await api.request('POST', '/supplier-report-type/', {
      name: 'Sequence',
      fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
      parser: `const QUANTITY = "${quantity.hashId}";\n${PARSER}`,
    }),
    'report type',
  );
  const type = ok(
    await api.request('POST', '/device-type/', {
      name: 'Sequencer',
      eventHandler: `const REPORT_TYPE = "${reportType.hashId}"; const BUSY_MS = ${busyMs};\n${HANDLER}`,
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [{ name: 'Sequence', pinFieldConfigurations: [], defaultPinName: 'S', charts: [] }],
      commandTypeHashIds: [],
    }),
    'device type',
  );
  const devices: ReportingDevice[] = [];
  for (let i = 0; i < n; i++) {
    const identity = `seq-${randomBytes(6).toString('hex')}`;
    const key = randomBytes(16);
    const device = ok(
      await api.request('POST', '/device/psk', {
        supplierDeviceIdentifier: identity,
        deviceTypeHashId: type.hashId,
        psk: key.toString('hex'),
        pskIdentity: identity,
      }),
      'device',
    );
    devices.push({ identity, key, hashId: device.hashId });
  }
  return devices;
}

/** What a load run sent: the payloads each answer status was given for (`null`: no answer, e.g. refused at the handshake). */
export interface LoadOutcome {
  accepted: string[];
  byStatus: Map<number | null, number>;
}

/**
 * Each device reports over its own TLS-PSK connections, one request after the other, until `stop()` resolves;
 * a report counts as accepted when answered 200 or 202. `outcome`, when given, is filled as the answers come (a test
 * waits on it for what the load has seen so far) and is what resolves.
 */
export async function reportUntil(
  port: number,
  devices: ReportingDevice[],
  stopped: Promise<void>,
  outcome: LoadOutcome = { accepted: [], byStatus: new Map() },
): Promise<LoadOutcome> {
  let done = false;
  void stopped.then(() => {
    done = true;
  });
  const { accepted, byStatus } = outcome;
  await Promise.all(
    devices.map(async (device, d) => {
      for (let seq = 0; !done; seq++) {
        const payload = JSON.stringify({ d, seq });
        const answer = await pskHttpRequest({ port, identity: device.identity, key: device.key, path: '/report', body: payload });
        const status = answer?.status ?? null;
        byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
        if (status === 200 || status === 202) accepted.push(payload);
        else await new Promise((r) => setTimeout(r, 100));
      }
    }),
  );
  return { accepted, byStatus };
}

/** Waits (≤ `ms`) until every accepted payload is stored; returns the stored payloads of the devices. */
export async function storedPayloads(db: Queryable, environmentHashId: string, outcome: LoadOutcome, ms = 60_000): Promise<string[]> {
  let stored: string[] = [];
  for (let i = 0; i < ms / 100; i++) {
    const { rows } = await db.query<{ payload: string }>(
      'SELECT r.payload FROM condition_report r JOIN environment e ON e.id = r.environment_id WHERE e.hash_id = $1',
      [environmentHashId],
    );
    stored = rows.map((r) => r.payload);
    const have = new Set(stored);
    if (outcome.accepted.every((p) => have.has(p))) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return stored;
}

export function expectEachStoredOnce(outcome: LoadOutcome, stored: string[]): void {
  const missing = outcome.accepted.filter((p) => !stored.includes(p));
  expect(missing, `accepted but not stored (answers: ${JSON.stringify([...outcome.byStatus])})`).toEqual([]);
  expect(stored.length, 'a report stored twice').toBe(new Set(stored).size);
}
