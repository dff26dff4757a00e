/**
 * Two gateway processes as one CID-routed cluster (DTLS_CLUSTER_PORT) behind a real nginx `stream` UDP balancer
 * (round robin): a device with a Connection ID changes its source port, the balancer hands it to the other node, and
 * its next Confirmable POST is answered and stored all the same.
 */
import { createSecretKey, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generate, parse, type ParsedPacket } from 'coap-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/app/db.ts';
import { Redis } from 'ioredis';
import { MessageKind, sealMessages } from '../../src/dtls/cluster/messages.ts';
import { CidClient } from '../support/cid-client/client.ts';
import { startBalancer, type Balancer } from '../../scripts/fleet/nginx.ts';
import { connectivityClient, pskDevice, type RestClient } from '../support/provision.ts';
import { killServiceProcesses, startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { freePort } from '../support/ports.ts';
import { until } from '../support/until.ts';

const HANDLER = `function handle(args: Arguments, exec: Exec) {
  const r = args.event.type === 'incomingRequest' ? args.event.webRequest : undefined;
  if (!r) return;
  const body = r.body !== undefined && r.body.type === 'json' ? r.body.data : {};
  exec.addLog('stored ' + JSON.stringify(body));
  return { statusCode: 200, body: { got: body } };
}`;

let db: Db;
let nginx: Balancer;
let balancedPort: number;
const nodes: ServiceProcess[] = [];
let api: RestClient;
const QUEUE_NAME = `cid-routing-${process.pid}`;

beforeAll(async () => {
  const DATABASE_URL = process.env.DATABASE_URL!;
  const common = {
    DATABASE_URL,
    QUEUE_NAME,
    DTLS_CLUSTER_PORT: '0',
    DTLS_CLUSTER_ADDRESS: '127.0.0.1',
    COAP_PIGGYBACK_MS: '10000',
    LOG_LEVEL: 'warn',
  };
  const coapsPorts = [await freePort(), await freePort()];
  // one after the other: the first applies the migrations
  for (const port of coapsPorts) {
    const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-cid-node-'));
    nodes.push(await startServiceProcess({ ...common, DATA_DIR, CERTS_DIR: path.join(DATA_DIR, 'certs'), COAPS_PORT: String(port) }));
  }
  balancedPort = await freePort();
  nginx = await startBalancer(mkdtempSync(path.join(os.tmpdir(), 'gridgate-nginx-')), [
    { listen: balancedPort, protocol: 'udp', upstreams: coapsPorts.map((p) => `127.0.0.1:${p}`) },
  ]);
  db = await openDb({ databaseUrl: DATABASE_URL, dataDir: '/tmp', migrate: false });
  api = await connectivityClient(db, nodes[0].base);
}, 120_000);

afterAll(async () => {
  await nginx?.stop();
  killServiceProcesses();
  await db?.close();
});

/** A metric's value on a node's /metrics (0 when absent). */
async function metric(node: ServiceProcess, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${node.base}/metrics`)).text();
  const prefix = labels ? `${name}{${labels}} ` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line ? Number(line.split(' ').pop()) : 0;
}

let messageId = 1;
/** A Confirmable POST of `body` as JSON to /report (`again`: that message once more, as a retransmission); the CoAP answer (piggybacked on the ACK). */
async function post(c: CidClient, body: unknown, again?: { messageId: number; token: Buffer }): Promise<ParsedPacket> {
  const token = again?.token ?? randomBytes(4);
  c.received.length = 0;
  c.send(
    generate({
      confirmable: true,
      code: 'POST',
      messageId: again?.messageId ?? messageId++,
      token,
      options: [
        { name: 'Uri-Path', value: Buffer.from('report') },
        { name: 'Content-Format', value: Buffer.from([50]) },
      ],
      payload: Buffer.from(JSON.stringify(body)),
    }),
  );
  const answer = await until(
    async () => c.received.map((r) => parse(r.data)).find((p) => p.token.equals(token)),
    (p) => p !== undefined,
    'the CoAP answer',
    15_000,
  );
  return answer!;
}

async function storedLogs(deviceHashId: string): Promise<string[]> {
  const { rows } = await db.query<{ log: { message: string }[] }>(
    'SELECT a.log FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1 AND NOT a.failed ORDER BY a.id',
    [deviceHashId],
  );
  return rows.flatMap((r) => r.log.map((l) => l.message)).filter((m) => m.startsWith('stored '));
}

describe('CID routing behind a UDP balancer', () => {
  it('a device that changes its source port lands on the other node and its next Confirmable POST is answered and stored', async () => {
    const device = await pskDevice(api, HANDLER);
    const c = new CidClient(balancedPort, { identity: device.identity, psk: device.key });
    try {
      await c.connect();
      const owner = (await metric(nodes[0], 'gridgate_dtls_sessions', '')) === 1 ? 0 : 1;
      const other = 1 - owner;
      expect(await metric(nodes[owner], 'gridgate_dtls_sessions', '')).toBe(1);
      const first = await post(c, { n: 1 });
      expect(first.code).toBe('2.05');
      expect(first.ack).toBe(true);
      expect(JSON.parse(first.payload.toString())).toEqual({ got: { n: 1 } });

      await c.rebind(); // a NAT's new port: the balancer sends it to the next node
      const second = await post(c, { n: 2 });
      expect(second.code).toBe('2.05');
      expect(second.ack).toBe(true);
      expect(JSON.parse(second.payload.toString())).toEqual({ got: { n: 2 } });
      // the record went through the other node, which never had a session of its own
      expect(await metric(nodes[other], 'gridgate_dtls_cluster_forwarded_total', 'kind="record",direction="out"')).toBe(1);
      expect(await metric(nodes[other], 'gridgate_dtls_cluster_forwarded_total', 'kind="answer",direction="in"')).toBe(1);
      expect(await metric(nodes[owner], 'gridgate_dtls_cluster_forwarded_total', 'kind="record",direction="in"')).toBe(1);
      expect(await metric(nodes[other], 'gridgate_dtls_sessions', '')).toBe(0);
      expect(
        await until(
          () => storedLogs(device.hashId),
          (l) => l.length === 2,
          'both reports stored',
        ),
      ).toEqual(['stored {"n":1}', 'stored {"n":2}']);
    } finally {
      c.close();
    }
  }, 60_000);

  it('a session whose records keep reaching the other node moves there between two exchanges: no handshake, nothing stored twice, its records no longer forwarded', async () => {
    const device = await pskDevice(api, HANDLER);
    const c = new CidClient(balancedPort, { identity: device.identity, psk: device.key });
    const sessions = (n: number) => metric(nodes[n], 'gridgate_dtls_sessions', '');
    const forwarded = (n: number) => metric(nodes[n], 'gridgate_dtls_cluster_forwarded_total', 'kind="record",direction="out"');
    const started = (n: number, origin: string) => metric(nodes[n], 'gridgate_dtls_sessions_started_total', `origin="${origin}"`);
    const handovers = (n: number) => metric(nodes[n], 'gridgate_dtls_cluster_handovers_total', '');
    try {
      const before = await Promise.all([0, 1].map(sessions));
      await c.connect();
      const owner = (await sessions(0)) === before[0] + 1 ? 0 : 1;
      const other = 1 - owner;
      const [handedOver, handshakes, kept, sentBefore] = [
        await handovers(owner),
        await started(other, 'handshake'),
        await started(other, 'kept'),
        await forwarded(other),
      ];
      await c.rebind(); // from now on the balancer hands this device's datagrams to the other node
      // DTLS_CLUSTER_HANDOVER_AFTER (4) records through the other node, each answered by the owner
      for (let n = 1; n <= 4; n++) expect(JSON.parse((await post(c, { n })).payload.toString())).toEqual({ got: { n } });
      expect(await forwarded(other)).toBe(sentBefore + 4);
      await until(
        () => handovers(owner),
        (n) => n === handedOver + 1,
        'the owner to hand the session over',
        5000,
      );
      expect(await sessions(owner)).toBe(before[owner]);
      // the next record is carried on where it arrived (it goes once more by way of the owner, which points at the new node)
      const fifth = await post(c, { n: 5 });
      expect(fifth.code).toBe('2.05');
      expect(JSON.parse(fifth.payload.toString())).toEqual({ got: { n: 5 } });
      expect(await sessions(other)).toBe(before[other] + 1);
      expect(await started(other, 'kept')).toBe(kept + 1);
      const sentAfterMove = await forwarded(other);
      const sixth = await post(c, { n: 6 });
      expect(JSON.parse(sixth.payload.toString())).toEqual({ got: { n: 6 } });
      // a retransmission of the last request is answered from what the session carried over, not run again
      const again = await post(c, { n: 6 }, { messageId: sixth.messageId, token: sixth.token });
      expect(again.code).toBe('2.05');
      expect(JSON.parse(again.payload.toString())).toEqual({ got: { n: 6 } });
      expect(await forwarded(other)).toBe(sentAfterMove); // answered by the node the device's records reach
      expect(await started(other, 'handshake')).toBe(handshakes);
      expect(
        await until(
          () => storedLogs(device.hashId),
          (l) => l.length >= 6,
          'six reports stored',
        ),
      ).toEqual([1, 2, 3, 4, 5, 6].map((n) => `stored {"n":${n}}`));
      await new Promise((r) => setTimeout(r, 300));
      expect(await storedLogs(device.hashId)).toHaveLength(6);
    } finally {
      c.close();
    }
  }, 60_000);

  it("a forwarding datagram without the deployment's MAC is dropped: the record it carries is not processed", async () => {
    const device = await pskDevice(api, HANDLER);
    const c = new CidClient(balancedPort, { identity: device.identity, psk: device.key });
    const attacker = dgram.createSocket('udp4');
    const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      await c.connect();
      const ownerId = c.serverCid[0];
      const [, port] = (await redis.get(`{${QUEUE_NAME}:dtls-cluster}:node:${ownerId}`))!.split(' ');
      const record = c.sealApplicationData(generate({ confirmable: true, code: 'POST', messageId: 9, token: randomBytes(4), payload: Buffer.from('{}') }), 1);
      const forged = sealMessages(createSecretKey(randomBytes(32)), (ownerId + 1) % 256, [
        { kind: MessageKind.forward, address: '127.0.0.1', port: 9, datagram: record },
      ]);
      const unauthenticated = async () =>
        (await Promise.all(nodes.map((n) => metric(n, 'gridgate_dtls_cluster_failures_total', 'reason="unauthenticated"')))).reduce((a, b) => a + b);
      const before = await unauthenticated();
      await new Promise<void>((r) => attacker.send(forged, Number(port), '127.0.0.1', () => r()));
      await until(unauthenticated, (n) => n === before + 1, 'the forged datagram refused', 5000);
      await new Promise((r) => setTimeout(r, 500));
      expect(await storedLogs(device.hashId)).toEqual([]);
    } finally {
      c.close();
      attacker.close();
      await redis.quit();
    }
  }, 60_000);
});
