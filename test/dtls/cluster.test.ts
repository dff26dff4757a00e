/**
 * A CID-routed cluster of two DTLS servers in this process (src/dtls/cluster/), with real sockets and the real Redis
 * their node directory lives in: the device's records reach the node its CID names through whichever node they
 * arrive at, and the answers leave from that node's socket.
 */
import { createSecretKey, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/app/logger.ts';
import { Redis } from 'ioredis';
import { MAX_NODES } from '../../src/dtls/cluster/cid.ts';
import { MessageKind, sealMessage } from '../../src/dtls/cluster/messages.ts';
import { DtlsClusterNode } from '../../src/dtls/cluster/node.ts';
import { NodeRegistry } from '../../src/dtls/cluster/registry.ts';
import type { ClusterEvent, DtlsClusterOptions } from '../../src/dtls/cluster/node.ts';
import { CidClient } from '../support/cid-client/client.ts';
import { freeUdpPort } from '../support/nginx.ts';
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

async function startNode(deployment: string, takeOverSession?: DtlsClusterOptions['takeOverSession'], leaseMs = 3000): Promise<Node> {
  const srv = await startEchoServer();
  open.push(srv.server);
  const events: ClusterEvent[] = [];
  const cluster = await DtlsClusterNode.start({ redis, log, deployment, key, address: '127.0.0.1', port: 0, leaseMs, count: (e) => events.push(e), ...(takeOverSession ? { takeOverSession } : {}) }, srv.server);
  open.push(cluster);
  return { deployment, srv, cluster, events };
}

async function twoNodes(takeOverSession?: DtlsClusterOptions['takeOverSession']): Promise<[Node, Node]> {
  const deployment = `cid-test-${randomBytes(4).toString('hex')}`;
  const a = await startNode(deployment, takeOverSession);
  const b = await startNode(deployment);
  await until(async () => a.cluster.registry.lookup(b.cluster.nodeId), (p) => p !== undefined, 'node a to know node b', 2000);
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

describe('CID-routed DTLS cluster', () => {
  it('each node leases its own node id in Redis (one hash-tagged key, expiring) and gives it back on close', async () => {
    const [a, b] = await twoNodes();
    expect(a.cluster.nodeId).not.toBe(b.cluster.nodeId);
    const keyOfA = `{${a.deployment}:dtls-cluster}:node:${a.cluster.nodeId}`;
    expect(await redis.get(keyOfA)).toMatch(new RegExp(`^127\\.0\\.0\\.1 ${a.cluster.socket.address().port} [0-9a-f]{16}$`));
    const ttl = await redis.pttl(keyOfA);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(3000);
    expect(a.cluster.registry.nodes.get(b.cluster.nodeId)).toEqual({ address: '127.0.0.1', port: b.cluster.socket.address().port });
    await b.cluster.close();
    open.splice(open.indexOf(b.cluster), 1);
    expect(await redis.exists(`{${b.deployment}:dtls-cluster}:node:${b.cluster.nodeId}`)).toBe(0);
    await until(async () => a.cluster.registry.nodes.has(b.cluster.nodeId), (has) => !has, 'node a to forget node b', 3000);
  });

  it('a node that joins or leaves is known to the others at once, not at their next heartbeat', async () => {
    // a 60 s lease: the heartbeat that would read the directory again comes after 20 s
    const deployment = `cid-test-${randomBytes(4).toString('hex')}`;
    const a = await startNode(deployment, undefined, 60_000);
    const b = await startNode(deployment, undefined, 60_000);
    await until(async () => a.cluster.registry.peer(b.cluster.nodeId), (p) => p !== undefined, 'node a to know node b', 2000);
    await b.cluster.close();
    open.splice(open.indexOf(b.cluster), 1);
    await until(async () => a.cluster.registry.peer(b.cluster.nodeId), (p) => p === undefined, 'node a to forget node b', 2000);
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

  it('an inter-node datagram without the deployment\'s MAC is dropped: no forged source address gets through', async () => {
    const [a, b] = await twoNodes();
    const c = await deviceOn(a);
    const session = a.srv.sessions[0];
    const homePort = session.remotePort;
    const record = c.sealApplicationData('forged', 5);
    const attacker = dgram.createSocket('udp4');
    open.push(attacker);
    const forged = { kind: MessageKind.forward, node: b.cluster.nodeId, address: '127.0.0.1', port: 9, datagram: record };
    const toA = (m: Buffer) => new Promise<void>((r) => attacker.send(m, a.cluster.socket.address().port, '127.0.0.1', () => r()));
    await toA(sealMessage(createSecretKey(randomBytes(32)), forged)); // another key
    const genuine = sealMessage(key, forged);
    genuine[genuine.length - 1] ^= 1; // the right key, a tag off by one bit
    await toA(genuine);
    await toA(sealMessage(key, forged, Date.now() - 60_000)); // the right key, but stale
    await until(async () => count(a.events, 'unauthenticated'), (n) => n === 3, 'three unauthenticated datagrams', 2000);
    expect(a.srv.data).toEqual([]);
    expect(session.remotePort).toBe(homePort);

    // the same record with the deployment's MAC is taken, and moves the session to the address it names
    await toA(sealMessage(key, forged));
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
    await until(async () => [count(b.events, 'unknown_node'), count(a.events, 'no_session')], ([u, n]) => u === 1 && n === 1, 'both dropped', 3000);
    expect(a.srv.data).toEqual([]);
  });

  it('a record for a session the owner no longer holds goes to the takeover hook first, with the device\'s address', async () => {
    const offered: Array<{ cid: string; from: { address: string; port: number } }> = [];
    const [a, b] = await twoNodes(async (cid, _datagram, from) => {
      offered.push({ cid: cid.toString('hex'), from });
      return true;
    });
    const c = await deviceOn(a);
    const record = Buffer.from(c.sealApplicationData('after a restart', 3));
    record[12] ^= 0xff; // a CID of node a that no session of a holds (as after a restart of a)
    const peer = dgram.createSocket('udp4');
    open.push(peer);
    await new Promise<void>((r) => peer.bind(0, '127.0.0.1', () => r()));
    peer.send(record, b.srv.port, '127.0.0.1');
    await until(async () => offered.length, (n) => n === 1, 'the takeover hook called', 3000);
    expect(offered[0]).toEqual({ cid: record.subarray(11, 19).toString('hex'), from: { address: '127.0.0.1', port: peer.address().port } });
    expect(count(a.events, 'no_session')).toBe(0); // taken over: not counted as dropped
  });

  it('the node directory logs a Redis outage as one line when it begins and one when it ends, and keeps the nodes it knew', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-cid-redis-'));
    const port = await freePort();
    let server = await startRedis(port, dir);
    // commands fail during the outage (the service's connection would wait instead: its outage is logged by app/redis.ts)
    const conn = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
    conn.on('error', () => undefined);
    const lines: Array<{ level: number; msg: string }> = [];
    const registry = new NodeRegistry(conn, createLogger('info', { write: (l: string) => { lines.push(JSON.parse(l)); } }), 'outage', { address: '127.0.0.1', port: await freeUdpPort() }, 600);
    open.push({ close: async () => { await registry.leave(); conn.disconnect(); } });
    const id = await registry.join();
    server.kill('SIGKILL');
    await exited(server);
    await until(async () => lines.length, (n) => n === 1, 'the outage line', 5000);
    await new Promise((r) => setTimeout(r, 1500)); // several heartbeats into the outage
    expect(registry.peer(id)).toBeDefined();
    server = await startRedis(port, dir);
    open.push({ close: () => server.kill('SIGKILL') });
    await until(async () => lines.length, (n) => n === 2, 'the line of its end', 5000);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, 'dtls cluster: the node directory in Redis is unreachable; forwarding with the nodes known before'],
      [30, 'dtls cluster: the node directory in Redis is reachable again'],
    ]);
    // the lease was taken again after the restart (the new Redis had none)
    await until(async () => conn.exists(`{outage:dtls-cluster}:node:${registry.nodeId}`), (n) => n === 1, 'the lease back', 3000);
  });
});
