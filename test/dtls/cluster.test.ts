/**
 * A CID-routed cluster of two DTLS servers in this process (src/dtls/cluster/), with real sockets and the real Redis
 * their node directory lives in: the device's records reach the node its CID names through whichever node they
 * arrive at, and the answers leave from that node's socket.
 */
import { createHmac, createSecretKey, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/app/logger.ts';
import { Redis } from 'ioredis';
import { MAX_NODES } from '../../src/dtls/cluster/cid.ts';
import { MessageKind, sealMessages } from '../../src/dtls/cluster/messages.ts';
import type { ClusterMessage } from '../../src/dtls/cluster/messages.ts';
import { DtlsClusterNode } from '../../src/dtls/cluster/node.ts';
import { NodeRegistry } from '../../src/gateway/cluster-registry.ts';
import type { ClusterEvent, DtlsClusterOptions } from '../../src/dtls/cluster/node.ts';
import type { NodeAddress } from '../../src/dtls/cluster/directory.ts';
import { CidClient } from '../support/cid-client/client.ts';
import { freePort } from '../support/ports.ts';
import { exited, killPrivateRedis, startRedis } from '../support/private-redis.ts';
import { until } from '../support/until.ts';
import { IDENTITY, PSK_HEX, startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const log = createLogger('silent');
const key = createSecretKey(randomBytes(32));

interface Node {
  deployment: string;
  srv: EchoServer;
  cluster: DtlsClusterNode;
  events: ClusterEvent[];
}

const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});
afterAll(async () => {
  killPrivateRedis();
  await redis.quit();
});

type NodeOptions = Pick<DtlsClusterOptions, 'takeOverSession' | 'batchBytes' | 'batchWindowMs'> & { leaseMs?: number };

async function startNode(deployment: string, opts: NodeOptions = {}): Promise<Node> {
  const srv = await startEchoServer();
  open.push(srv.server);
  const events: ClusterEvent[] = [];
  const { leaseMs = 3000, ...rest } = opts;
  const directory = (self: NodeAddress) => new NodeRegistry(redis, log, deployment, self, leaseMs);
  const cluster = await DtlsClusterNode.start({ log, directory, key, address: '127.0.0.1', port: 0, count: (e) => events.push(e), ...rest }, srv.server);
  open.push(cluster);
  return { deployment, srv, cluster, events };
}

async function twoNodes(optsA: NodeOptions = {}, optsB: NodeOptions = {}): Promise<[Node, Node]> {
  const deployment = `cid-test-${randomBytes(4).toString('hex')}`;
  const a = await startNode(deployment, optsA);
  const b = await startNode(deployment, optsB);
  await until(
    async () => a.cluster.registry.lookup(b.cluster.nodeId),
    (p) => p !== undefined,
    'node a to know node b',
    2000,
  );
  return [a, b];
}

async function deviceOn(node: Node): Promise<CidClient> {
  const c = new CidClient(node.srv.port, { identity: IDENTITY, psk: Buffer.from(PSK_HEX, 'hex') });
  open.push(c);
  await c.connect();
  await waitFor(() => node.srv.sessions.length === 1);
  return c;
}

const count = (events: ClusterEvent[], e: ClusterEvent) => events.filter((x) => x === e).length;

/** Sends `datagram` to node `to`'s cluster port from a socket of the test's own (as a node, or an attacker, would). */
async function toClusterPort(to: Node, datagram: Buffer): Promise<void> {
  const s = dgram.createSocket('udp4');
  open.push(s);
  await new Promise<void>((r) => s.send(datagram, to.cluster.socket.address().port, '127.0.0.1', () => r()));
}

/** Forwards of `records` from the device at c's current port, as node `from` would send them. */
function forwards(c: CidClient, records: Buffer[]): ClusterMessage[] {
  return records.map((datagram) => ({ kind: MessageKind.forward, address: '127.0.0.1', port: c.localPort, datagram }));
}

describe('CID-routed DTLS cluster', () => {
  it('each node leases its own node id in Redis (one hash-tagged key, expiring) and gives it back on close', async () => {
    const [a, b] = await twoNodes();
    expect(a.cluster.nodeId).not.toBe(b.cluster.nodeId);
    const keyOfA = `{${a.deployment}:dtls-cluster}:node:${a.cluster.nodeId}`;
    expect(await redis.get(keyOfA)).toMatch(new RegExp(`^127\\.0\\.0\\.1 ${a.cluster.socket.address().port} [0-9a-f]{16} batches$`));
    const ttl = await redis.pttl(keyOfA);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(3000);
    expect(a.cluster.registry.nodes.get(b.cluster.nodeId)).toEqual({ address: '127.0.0.1', port: b.cluster.socket.address().port, batches: true });
    await b.cluster.close();
    open.splice(open.indexOf(b.cluster), 1);
    expect(await redis.exists(`{${b.deployment}:dtls-cluster}:node:${b.cluster.nodeId}`)).toBe(0);
    await until(
      async () => a.cluster.registry.nodes.has(b.cluster.nodeId),
      (has) => !has,
      'node a to forget node b',
      3000,
    );
  });

  it('a node that joins or leaves is known to the others at once, not at their next heartbeat', async () => {
    // a 60 s lease: the heartbeat that would read the directory again comes after 20 s
    const deployment = `cid-test-${randomBytes(4).toString('hex')}`;
    const a = await startNode(deployment, { leaseMs: 60_000 });
    const b = await startNode(deployment, { leaseMs: 60_000 });
    await until(
      async () => a.cluster.registry.peer(b.cluster.nodeId),
      (p) => p !== undefined,
      'node a to know node b',
      2000,
    );
    await b.cluster.close();
    open.splice(open.indexOf(b.cluster), 1);
    await until(
      async () => a.cluster.registry.peer(b.cluster.nodeId),
      (p) => p === undefined,
      'node a to forget node b',
      2000,
    );
  });

  it('the CIDs a node issues name it in their first byte and are random after it', async () => {
    const [a] = await twoNodes();
    const cids = Array.from({ length: 64 }, () => a.cluster.newCid());
    expect(new Set(cids.map((c) => c[0]))).toEqual(new Set([a.cluster.nodeId]));
    expect(cids.every((c) => c.length === 8)).toBe(true);
    expect(new Set(cids.map((c) => c.toString('hex'))).size).toBe(64);
    const c = await deviceOn(a);
    expect(c.serverCid[0]).toBe(a.cluster.nodeId);
  });

  it('a record that reaches another node is handled by the node its CID names, and the answer leaves from the node it reached', async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    c.send('at home');
    await c.waitForData((s) => s === 'echo:at home');
    const session = a.srv.sessions[0];
    const sentByA = a.srv.sent.length;

    await c.moveTo(b.srv.port); // a new source port, and the balancer picks node b
    c.send('moved');
    await c.waitForData((s) => s === 'echo:moved');
    expect(a.srv.data).toEqual(['at home', 'moved']);
    expect(b.srv.sessions).toHaveLength(0);
    expect(session.remotePort).toBe(c.localPort); // the owner follows the device to its new port
    // the answer (a tls12_cid record) went out of node b's socket, none out of node a's
    expect(a.srv.sent).toHaveLength(sentByA);
    expect(b.srv.sent.map((d) => d[0])).toEqual([25]);
    expect(count(b.events, 'forwarded_out')).toBe(1);
    expect(count(a.events, 'forwarded_in')).toBe(1);
    expect(count(a.events, 'answer_out')).toBe(1);
    expect(count(b.events, 'answer_in')).toBe(1);

    // back to node a directly: answered directly again
    await c.moveTo(a.srv.port);
    c.send('home again');
    await c.waitForData((s) => s === 'echo:home again');
    expect(count(a.events, 'answer_out')).toBe(1);
    expect(a.srv.data).toEqual(['at home', 'moved', 'home again']);
  });

  it("an inter-node datagram without the deployment's MAC is dropped: no forged source address gets through", async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    const session = a.srv.sessions[0];
    const homePort = session.remotePort;
    const record = c.sealApplicationData('forged', 5);
    const attacker = dgram.createSocket('udp4');
    open.push(attacker);
    const forged = [{ kind: MessageKind.forward, address: '127.0.0.1', port: 9, datagram: record }];
    const toA = (m: Buffer) => new Promise<void>((r) => attacker.send(m, a.cluster.socket.address().port, '127.0.0.1', () => r()));
    await toA(sealMessages(createSecretKey(randomBytes(32)), b.cluster.nodeId, forged)); // another key
    const genuine = sealMessages(key, b.cluster.nodeId, forged);
    genuine[genuine.length - 1] ^= 1; // the right key, a tag off by one bit
    await toA(genuine);
    await toA(sealMessages(key, b.cluster.nodeId, forged, Date.now() - 60_000)); // the right key, but stale
    await until(
      async () => count(a.events, 'unauthenticated'),
      (n) => n === 3,
      'three unauthenticated datagrams',
      2000,
    );
    expect(a.srv.data).toEqual([]);
    expect(session.remotePort).toBe(homePort);

    // the same record with the deployment's MAC is taken, and moves the session to the address it names
    await toA(sealMessages(key, b.cluster.nodeId, forged));
    await waitFor(() => a.srv.data.length === 1);
    expect(a.srv.data).toEqual(['forged']);
    expect(session.remotePort).toBe(9);
  });

  it('a record whose CID names no live node, or a node without that session, is dropped (the device handshakes again)', async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    const free = Array.from({ length: MAX_NODES }, (_, i) => i).find((i) => i !== a.cluster.nodeId && i !== b.cluster.nodeId)!;
    const record = c.sealApplicationData('lost', 7);
    const orphan = Buffer.from(record);
    orphan[11] = free; // the CID now names a node that is not there (the record fails nowhere: it reaches no session)
    const noSession = Buffer.from(record);
    noSession[12] ^= 0xff; // names node a, but no session of a holds it
    const peer = dgram.createSocket('udp4');
    open.push(peer);
    peer.send(orphan, b.srv.port, '127.0.0.1');
    peer.send(noSession, b.srv.port, '127.0.0.1');
    await until(
      async () => [count(b.events, 'unknown_node'), count(a.events, 'no_session')],
      ([u, n]) => u === 1 && n === 1,
      'both dropped',
      3000,
    );
    expect(a.srv.data).toEqual([]);
  });

  it("a record for a session the owner no longer holds goes to the takeover hook first, with the device's address", async () => {
    const offered: Array<{ cid: string; from: { address: string; port: number } }> = [];
    const [a, b] = await twoNodes({
      takeOverSession: async (cid, _datagram, from) => {
        offered.push({ cid: cid.toString('hex'), from });
        return true;
      },
    });
    const c = await deviceOn(a);
    const record = Buffer.from(c.sealApplicationData('after a restart', 3));
    record[12] ^= 0xff; // a CID of node a that no session of a holds (as after a restart of a)
    const peer = dgram.createSocket('udp4');
    open.push(peer);
    await new Promise<void>((r) => peer.bind(0, '127.0.0.1', () => r()));
    peer.send(record, b.srv.port, '127.0.0.1');
    await until(
      async () => offered.length,
      (n) => n === 1,
      'the takeover hook called',
      3000,
    );
    expect(offered[0]).toEqual({ cid: record.subarray(11, 19).toString('hex'), from: { address: '127.0.0.1', port: peer.address().port } });
    expect(count(a.events, 'no_session')).toBe(0); // taken over: not counted as dropped
  });

  it('several forwarded records in one inter-node datagram are all processed, in order, and answered in one datagram', async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    const sentByA = a.cluster.sent.datagrams;
    const records = [1, 2, 3, 4].map((i) => c.sealApplicationData(`batched ${i}`, 10 + i));
    await toClusterPort(a, sealMessages(key, b.cluster.nodeId, forwards(c, records)));
    await until(
      async () => c.received.length,
      (n) => n === 4,
      'four echoes',
      3000,
    );
    expect(a.srv.data).toEqual(['batched 1', 'batched 2', 'batched 3', 'batched 4']);
    expect(c.received.map((r) => r.data.toString())).toEqual(['echo:batched 1', 'echo:batched 2', 'echo:batched 3', 'echo:batched 4']);
    // the four answers went back to node b in one datagram, and out of b's socket to the device
    expect(a.cluster.sent.datagrams - sentByA).toBe(1);
    expect(count(b.events, 'answer_in')).toBe(4);
    expect(b.srv.sent).toHaveLength(4);
  });

  it('the records a node receives in one turn for one peer go there in one datagram, and their answers back in one', async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    await c.moveTo(b.srv.port);
    const before = { a: { ...a.cluster.sent }, b: { ...b.cluster.sent } };
    const sent = Array.from({ length: 10 }, (_, i) => `burst ${i}`);
    for (const s of sent) c.send(s); // all in the socket's queue before node b's event loop reads one
    await until(
      async () => c.received.length,
      (n) => n === 10,
      'ten echoes',
      3000,
    );
    expect(a.srv.data).toEqual(sent);
    expect(c.received.map((r) => r.data.toString())).toEqual(sent.map((s) => `echo:${s}`));
    expect(b.cluster.sent.messages - before.b.messages).toBe(10);
    expect(b.cluster.sent.datagrams - before.b.datagrams).toBe(1);
    expect(a.cluster.sent.messages - before.a.messages).toBe(10);
    expect(a.cluster.sent.datagrams - before.a.datagrams).toBe(1);
  });

  it('an inter-node datagram with a wrong tag, cut short, or a message length past its end is dropped whole: none of its records is processed', async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    const genuine = sealMessages(key, b.cluster.nodeId, forwards(c, [c.sealApplicationData('first', 20), c.sealApplicationData('second', 21)]));
    const wrongTag = Buffer.from(genuine);
    wrongTag[wrongTag.length - 3] ^= 0x40;
    const cutShort = genuine.subarray(0, genuine.length - 30);
    // the second message's datagram length runs past the end, and the tag is made right for it (as only a key holder could)
    const pastEnd = Buffer.from(genuine);
    // layout (messages.ts): header (8) ‖ kind, port, address length (4) ‖ address ‖ datagram length (2) ‖ datagram ‖ …
    const firstLength = 8 + 4 + '127.0.0.1'.length;
    const secondLength = firstLength + 2 + genuine.readUInt16BE(firstLength) + 4 + '127.0.0.1'.length;
    pastEnd.writeUInt16BE(pastEnd.readUInt16BE(secondLength) + 1, secondLength);
    createHmac('sha256', key)
      .update(pastEnd.subarray(0, pastEnd.length - 16))
      .digest()
      .copy(pastEnd, pastEnd.length - 16, 0, 16);
    for (const d of [wrongTag, cutShort, pastEnd]) await toClusterPort(a, d);
    await until(
      async () => count(a.events, 'unauthenticated'),
      (n) => n === 3,
      'three datagrams refused',
      3000,
    );
    expect(count(a.events, 'forwarded_in')).toBe(0);
    expect(a.srv.data).toEqual([]);
    // the genuine one is taken, both its records
    await toClusterPort(a, genuine);
    await until(
      async () => a.srv.data.length,
      (n) => n === 2,
      'both records',
      3000,
    );
    expect(a.srv.data).toEqual(['first', 'second']);
  });

  it('a node of the version before batches (no "batches" in the directory) is sent one message a datagram in its format, and read in it', async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    // the old node: a directory entry without the fourth word, and its inter-node socket
    const old = dgram.createSocket('udp4');
    open.push(old);
    await new Promise<void>((r) => old.bind(0, '127.0.0.1', r));
    // a free id: not node a's, nor node b's (ids are leased from a random start, so b's may be a's + 1)
    const oldId = [1, 2].map((d) => (a.cluster.nodeId + d) % MAX_NODES).find((id) => id !== b.cluster.nodeId)!;
    await redis.set(`{${a.deployment}:dtls-cluster}:node:${oldId}`, `127.0.0.1 ${old.address().port} 0123456789abcdef`, 'PX', 10_000);
    await until(
      async () => a.cluster.registry.lookup(oldId),
      (p) => p !== undefined,
      'node a to know the old node',
      2000,
    );
    expect(a.cluster.registry.peer(oldId)?.batches).toBe(false);
    const got: Buffer[] = [];
    old.on('message', (m) => got.push(m));
    // its forward, in its layout: magic 0xd7 ‖ kind ‖ node ‖ sent at (6) ‖ port (2) ‖ address length ‖ address ‖ record ‖ tag
    const oldFormat = (kind: number, node: number, port: number, datagram: Buffer): Buffer => {
      const head = Buffer.alloc(12);
      head[0] = 0xd7;
      head[1] = kind;
      head[2] = node;
      head.writeUIntBE(Date.now(), 3, 6);
      head.writeUInt16BE(port, 9);
      head[11] = 9;
      const body = Buffer.concat([head, Buffer.from('127.0.0.1', 'latin1'), datagram]);
      return Buffer.concat([body, createHmac('sha256', key).update(body).digest().subarray(0, 16)]);
    };
    for (const [i, text] of ['old one', 'old two'].entries())
      await toClusterPort(a, oldFormat(MessageKind.forward, oldId, c.localPort, c.sealApplicationData(text, 30 + i)));
    await until(
      async () => got.length,
      (n) => n === 2,
      'two answers to the old node',
      3000,
    );
    expect(a.srv.data).toEqual(['old one', 'old two']);
    // each answer alone, in the old layout, with a tag the old node checks
    for (const m of got) {
      expect(m[0]).toBe(0xd7);
      expect(m[1]).toBe(MessageKind.answer);
      expect(m[2]).toBe(a.cluster.nodeId);
      expect(m.readUInt16BE(9)).toBe(c.localPort);
      expect(m.subarray(m.length - 16)).toEqual(
        createHmac('sha256', key)
          .update(m.subarray(0, m.length - 16))
          .digest()
          .subarray(0, 16),
      );
      expect(m[12 + m[11]]).toBe(25); // a tls12_cid record for the device
    }
    // the old node passes them on to the device: the echoes of what it forwarded
    for (const m of got) old.send(m.subarray(12 + m[11], m.length - 16), c.localPort, '127.0.0.1');
    await c.waitForData((t) => t === 'echo:old two');
    expect(c.received.map((r) => r.data.toString())).toEqual(['echo:old one', 'echo:old two']);
  });

  it('a record too large for a batch is forwarded alone, between the batches before and after it, in order', async () => {
    const [a, b] = await twoNodes({ batchBytes: 300 }, { batchBytes: 300 });
    const c = await deviceOn(a);
    await c.moveTo(b.srv.port);
    const large = `large ${'x'.repeat(400)}`;
    const sent = ['small 1', 'small 2', large, 'small 3'];
    const before = { ...b.cluster.sent };
    for (const s of sent) c.send(s);
    await until(
      async () => c.received.length,
      (n) => n === 4,
      'four echoes',
      3000,
    );
    expect(a.srv.data).toEqual(sent);
    // small 1 and 2 together, the large one alone, small 3
    expect(b.cluster.sent.datagrams - before.datagrams).toBe(3);
    // its echo, too large as well, came back alone
    expect(c.received.map((r) => r.data.toString())).toEqual(sent.map((s) => `echo:${s}`));
  });

  it('with batchBytes 0 every forwarded record and every answer goes in a datagram of its own', async () => {
    const [a, b] = await twoNodes({ batchBytes: 0 }, { batchBytes: 0 });
    const c = await deviceOn(a);
    await c.moveTo(b.srv.port);
    const sent = ['one', 'two', 'three'];
    for (const s of sent) c.send(s);
    await until(
      async () => c.received.length,
      (n) => n === 3,
      'three echoes',
      3000,
    );
    expect(a.srv.data).toEqual(sent);
    expect(b.cluster.sent).toEqual({ datagrams: 3, messages: 3 });
    expect(a.cluster.sent).toEqual({ datagrams: 3, messages: 3 });
  });

  it('under load a batch waits the window for the records of later turns; a record after a quiet spell leaves at the end of its turn', async () => {
    const [a, b] = await twoNodes({}, { batchWindowMs: 300 });
    const c = await deviceOn(a);
    await c.moveTo(b.srv.port);
    await new Promise((r) => setTimeout(r, 400)); // quiet: longer than the window since b last sent
    c.send('first');
    await c.waitForData((s) => s === 'echo:first');
    expect(b.cluster.sent).toEqual({ datagrams: 1, messages: 1 });
    // within the window after that datagram: these wait for each other, though they come in separate turns
    c.send('second');
    await new Promise((r) => setTimeout(r, 20));
    c.send('third');
    await until(
      async () => c.received.length,
      (n) => n === 3,
      'three echoes',
      3000,
    );
    expect(a.srv.data).toEqual(['first', 'second', 'third']);
    expect(b.cluster.sent).toEqual({ datagrams: 2, messages: 3 });
  });

  it('the node directory logs a Redis outage as one line when it begins and one when it ends, and keeps the nodes it knew', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-cid-redis-'));
    const port = await freePort();
    let server = await startRedis(port, dir);
    // commands fail during the outage (the service's connection would wait instead: its outage is logged by app/redis.ts)
    const conn = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
    conn.on('error', () => undefined);
    const lines: Array<{ level: number; msg: string }> = [];
    const registry = new NodeRegistry(
      conn,
      createLogger('info', {
        write: (l: string) => {
          lines.push(JSON.parse(l));
        },
      }),
      'outage',
      { address: '127.0.0.1', port: await freePort() },
      600,
    );
    open.push({
      close: async () => {
        await registry.leave();
        conn.disconnect();
      },
    });
    const id = await registry.join();
    server.kill('SIGKILL');
    await exited(server);
    await until(
      async () => lines.length,
      (n) => n === 1,
      'the outage line',
      5000,
    );
    await new Promise((r) => setTimeout(r, 1500)); // several heartbeats into the outage
    expect(registry.peer(id)).toBeDefined();
    server = await startRedis(port, dir);
    open.push({ close: () => server.kill('SIGKILL') });
    await until(
      async () => lines.length,
      (n) => n === 2,
      'the line of its end',
      5000,
    );
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, 'dtls cluster: the node directory in Redis is unreachable; forwarding with the nodes known before'],
      [30, 'dtls cluster: the node directory in Redis is reachable again'],
    ]);
    // the lease was taken again after the restart (the new Redis had none)
    await until(
      async () => conn.exists(`{outage:dtls-cluster}:node:${registry.nodeId}`),
      (n) => n === 1,
      'the lease back',
      3000,
    );
  });
});
