// The fleet as a fleet: an API node, two gateway nodes and a worker (real processes of src/main.ts) behind a real
// nginx stream balancer, on the test PostgreSQL and Redis. Devices talk to the balancer only.
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/app/db.ts';
import { nodeMetric, startFleet, type Fleet } from '../../scripts/fleet/topology.ts';
import { DtlsCoapPeer } from '../coap/support.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { reportingDevices, type ReportingDevice } from '../support/report-world.ts';
import { until } from '../support/until.ts';

let fleet: Fleet;
let db: Db;
let api: RestClient;
let devices: ReportingDevice[];

beforeAll(async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-fleet-'));
  fleet = await startFleet({
    gateways: 2,
    workers: 1,
    dir,
    env: {
      DATABASE_URL: process.env.DATABASE_URL!,
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      SECRET_KEY: '44'.repeat(32),
      QUEUE_NAME: `fleet-${process.pid}`,
      DATA_DIR: path.join(dir, 'data'),
      CERTS_DIR: path.join(dir, 'certs'),
      SHUTDOWN_GRACE_MS: '5000',
    },
  });
  db = await openDb({ databaseUrl: process.env.DATABASE_URL!, dataDir: dir, migrate: false });
  api = await connectivityClient(db, fleet.apiBase);
  devices = await reportingDevices(api, 4);
}, 120_000);

afterAll(async () => {
  await db?.close();
  await fleet?.stop();
});

const stored = async (device: ReportingDevice): Promise<number[]> => {
  const { rows } = await db.query<{ significand: string }>(
    'SELECT m.significand FROM measurement m JOIN device d ON d.id = m.device_id WHERE d.hash_id = $1 ORDER BY m.significand',
    [device.hashId],
  );
  return rows.map((r) => Number(r.significand));
};

const coapReport = (peer: DtlsCoapPeer, d: number, seq: number) =>
  peer.exchange({
    code: 'POST',
    messageId: 1000 + seq,
    token: Buffer.from([d, seq]),
    options: [
      { name: 'Uri-Path', value: Buffer.from('report') },
      { name: 'Content-Format', value: Buffer.from([50]) },
    ],
    payload: Buffer.from(JSON.stringify({ d, seq })),
  });

describe('a fleet behind nginx', () => {
  it('HTTPS (TLS-PSK) reports through the balancer are spread over both gateway nodes and all stored', async () => {
    for (let seq = 0; seq < 6; seq++) {
      const device = devices[seq % 2];
      const answer = await pskHttpRequest({
        port: fleet.ports.https,
        identity: device.identity,
        key: device.key,
        path: '/report',
        body: JSON.stringify({ d: seq % 2, seq }),
      });
      expect(answer?.status).toBe(200);
      expect(JSON.parse(answer!.body)).toEqual({ ok: true });
    }
    await until(
      async () => (await stored(devices[0])).length + (await stored(devices[1])).length,
      (n) => n === 6,
      'six stored reports',
    );
    expect(await stored(devices[0])).toEqual([0, 2, 4]);
    expect(await stored(devices[1])).toEqual([1, 3, 5]);
    // nginx's round robin gave each gateway node connections
    const perNode = await Promise.all(
      fleet.gateways().map(async (g) => nodeMetric(await fleet.metrics(g), 'gridgate_gateway_device_requests_total', { protocol: 'https' })),
    );
    expect(perNode.every((n) => n >= 1)).toBe(true);
    expect(perNode.reduce((a, b) => a + b)).toBe(6);
  }, 60_000);

  it('a CoAP/DTLS device is answered through the balancer; after SIGKILL of its node its next contact succeeds on the other node, nothing accepted lost', async () => {
    const device = devices[2];
    let peer = await DtlsCoapPeer.connect(fleet.ports.coaps, device.identity, device.key);
    const answers: string[] = [];
    for (let seq = 0; seq < 3; seq++) answers.push((await coapReport(peer, 2, seq)).payload.toString());
    expect(answers.map((a) => JSON.parse(a))).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    // the node that holds the session
    const sessions = await Promise.all(
      fleet.gateways().map(async (g) => nodeMetric(await fleet.metrics(g), 'gridgate_gateway_device_requests_total', { protocol: 'coaps' })),
    );
    const holder = fleet.gateways()[sessions.findIndex((n) => n === 3)];
    expect(holder).toBeDefined();
    peer.close();
    await fleet.kill(holder, 'SIGKILL');
    // a new flow from a new source port: nginx sends it to the node that is left (a failed node is skipped)
    peer = await DtlsCoapPeer.connect(fleet.ports.coaps, device.identity, device.key);
    expect(JSON.parse((await coapReport(peer, 2, 3)).payload.toString())).toEqual({ ok: true });
    peer.close();
    await until(
      () => stored(device),
      (v) => v.length === 4,
      'four stored reports',
    );
    expect(await stored(device)).toEqual([0, 1, 2, 3]);
    const survivor = fleet.gateways().find((g) => g !== holder)!;
    expect(nodeMetric(await fleet.metrics(survivor), 'gridgate_gateway_device_requests_total', { protocol: 'coaps' })).toBeGreaterThanOrEqual(1);
    await fleet.restart(holder);
  }, 90_000);
});
