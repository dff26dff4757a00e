/** DtlsServer with a DtlsStateStore (real Redis): sessions carried from one server to the next, sealed state, nonces. */
import { randomBytes } from 'node:crypto';
import { dtls } from 'node-dtls-client';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { parseDatagram } from '../../src/dtls/record.ts';
import { DtlsStateStore } from '../../src/gateway/dtls-session-store.ts';
import { WRITE_LEASE, decodeKeys, encodeKeys } from '../../src/dtls/session-state.ts';
import { CidClient } from '../support/cid-client/client.ts';
import { until } from '../support/until.ts';
import { IDENTITY, PSK_HEX, startEchoServer, waitFor } from './helpers.ts';
import type { EchoServer } from './helpers.ts';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const SECRET = randomBytes(32);
const servers: EchoServer[] = [];
const clients: Array<ReturnType<typeof dtls.createSocket>> = [];
const cidClients: CidClient[] = [];
afterEach(async () => {
  for (const c of cidClients.splice(0)) c.close();
  for (const c of clients.splice(0)) {
    try {
      c.close();
    } catch {
      // closed already (the server ended its session)
    }
  }
  await Promise.all(servers.splice(0).map((s) => s.server.close()));
});
afterAll(async () => {
  const keys = await redis.keys('test-kept-*');
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

function store(prefix: string, secretKey = SECRET): DtlsStateStore {
  return new DtlsStateStore(redis, { prefix, secretKey, idleTimeoutMs: 60_000 });
}

async function echoServer(prefix: string, port = 0, secretKey = SECRET): Promise<EchoServer> {
  const kept = store(prefix, secretKey);
  const s = await startEchoServer({ keeper: kept, sharedCache: kept }, port);
  servers.push(s);
  return s;
}

/** node-dtls-client (PSK, CCM_8) connected to `port`; what it receives, as strings. */
async function client(port: number): Promise<{ send(text: string): void; got: string[] }> {
  const got: string[] = [];
  const socket = dtls.createSocket({
    type: 'udp4',
    address: '127.0.0.1',
    port,
    psk: { [IDENTITY]: Buffer.from(PSK_HEX, 'hex') },
    timeout: 5000,
    ciphers: ['TLS_PSK_WITH_AES_128_CCM_8'],
  });
  clients.push(socket);
  socket.on('message', (m: Buffer) => got.push(m.toString()));
  await new Promise<void>((resolve, reject) => {
    socket.on('connected', () => resolve());
    socket.on('error', reject);
  });
  return { send: (text) => socket.send(Buffer.from(text)), got };
}

/** A CidClient (PSK, CCM_8, with a Connection ID) whose session on `port` has had 'one' echoed; closed after the test. */
async function cidSession(port: number): Promise<CidClient> {
  const c = new CidClient(port, { identity: IDENTITY, psk: Buffer.from(PSK_HEX, 'hex'), suite: 'ccm8' });
  cidClients.push(c);
  await c.connect();
  c.send('one');
  await c.waitForData((x) => x === 'echo:one');
  return c;
}

/** The sequence number in the header of the first record of a datagram. */
const seq = (d: Buffer): number => d.readUIntBE(5, 6);

const prefix = () => `test-kept-${randomBytes(4).toString('hex')}:`;

describe('kept DTLS sessions', () => {
  it('suspend() on one server, the next on the same port and store carries the session on: no handshake, data answered', async () => {
    const p = prefix();
    const a = await echoServer(p);
    const c = await client(a.port);
    c.send('one');
    await waitFor(() => c.got.includes('echo:one'));
    expect(await a.server.suspend()).toBe(1);
    const b = await echoServer(p, a.port);
    c.send('two');
    await waitFor(() => c.got.includes('echo:two'));
    expect(b.sessions).toHaveLength(1);
    expect(b.sessions[0].restored).toBe(true);
    expect(b.sessions[0].pskIdentity).toBe(IDENTITY);
    expect(b.received.filter((d) => d[0] === 22)).toEqual([]); // no handshake record reached the second server
    // a hand-over: the next server continues the sequence numbers where the first stopped
    expect(seq(b.sent[0])).toBe(seq(a.sent.at(-1)!) + 1);
  });

  it('a record the first server accepted is refused by the next one (the replay window went with the session)', async () => {
    const p = prefix();
    const a = await echoServer(p);
    const c = await client(a.port);
    c.send('once');
    await waitFor(() => a.data.includes('once'));
    const record = a.received.at(-1)!;
    await a.server.suspend();
    const b = await echoServer(p, a.port);
    c.send('fresh');
    await waitFor(() => b.data.includes('fresh'));
    // the datagram as it came from the device's address:port (test/gateway/coaps-kept-sessions.test.ts sends it so)
    b.sessions[0].handleRecords(parseDatagram(record));
    await new Promise((r) => setTimeout(r, 200));
    expect(b.data).toEqual(['fresh']);
  });

  it('kept state is sealed: its bytes hold neither key block nor identity, and another SECRET_KEY cannot load it', async () => {
    const p = prefix();
    const a = await echoServer(p);
    const c = await client(a.port);
    c.send('x');
    await waitFor(() => c.got.includes('echo:x'));
    await a.server.suspend();
    const [name] = await redis.keys(`${p}{dtls:*`);
    expect(name).toMatch(/^test-kept-\w+:\{dtls:a127\.0\.0\.1:\d+\}$/);
    const sealed = Buffer.concat(Object.values(await redis.hgetallBuffer(name)));
    expect(sealed.includes(Buffer.from(IDENTITY))).toBe(false);
    const b = await echoServer(p, a.port, randomBytes(32));
    c.send('y');
    await new Promise((r) => setTimeout(r, 500));
    expect(b.sessions).toEqual([]);
    expect(await redis.exists(name)).toBe(0); // of no use to anyone: removed
  });

  it('a session closed by its peer is forgotten: nothing is kept for it', async () => {
    const p = prefix();
    const a = await echoServer(p);
    const c = await client(a.port);
    c.send('bye');
    await waitFor(() => c.got.includes('echo:bye'));
    const kept = () => redis.keys(`${p}{dtls:*`);
    await until(kept, (k) => k.length === 1, 'the session kept');
    a.sessions[0].close();
    await until(kept, (k) => k.length === 0, 'the session forgotten');
  });

  it('a server that dies without a hand-over: the next one carries the session on, sealing past every number the first leased', async () => {
    const p = prefix();
    const a = await echoServer(p);
    const c = await client(a.port);
    // more answers than one lease holds: the lease is renewed on the way
    for (let i = 0; i < WRITE_LEASE + 10; i++) {
      c.send(`m${i}`);
      await waitFor(() => c.got.includes(`echo:m${i}`));
    }
    const last = seq(a.sent.at(-1)!);
    a.server.socket.close(); // gone, as if killed: nothing written, nothing sent
    servers.splice(servers.indexOf(a), 1);
    const b = await echoServer(p, a.port);
    c.send('after');
    await waitFor(() => c.got.includes('echo:after'));
    expect(b.sessions[0].restored).toBe(true);
    const first = seq(b.sent[0]);
    expect(first).toBeGreaterThan(last);
    expect(first - last).toBeLessThanOrEqual(WRITE_LEASE); // node-dtls-client drops records more than 64 ahead
  });

  it('a Connection ID session is found by its CID on the next server, from a new source port too (takeOverSession by CID)', async () => {
    const p = prefix();
    const a = await echoServer(p);
    const c = await cidSession(a.port);
    const cid = a.sessions[0].connectionId!;
    await a.server.suspend();
    const b = await echoServer(p, a.port);
    await c.rebind(); // a NAT gave the device another port meanwhile
    c.send('two');
    const answer = await c.waitForData((x) => x === 'echo:two');
    expect(answer.localPort).toBe(c.localPort);
    expect(b.sessions).toHaveLength(1);
    expect(b.sessions[0].restored).toBe(true);
    expect(b.sessions[0].connectionId).toEqual(cid);
    expect(await b.server.takeOverSession(cid)).toBe(b.sessions[0]);
  });

  it('two loads of the same kept state get leases of their own', async () => {
    const p = prefix();
    const kept = store(p);
    const keys = { suiteId: 0xc0a8, extendedMasterSecret: true, keyBlock: randomBytes(40), sessionId: randomBytes(32), pskIdentity: 'd', peerCertificates: [] };
    expect(decodeKeys(encodeKeys(keys))).toEqual(keys);
    expect(
      kept.established('a10.0.0.1:5', keys, {
        writeSeq: 7,
        replay: [3, 15, 0],
        remoteAddress: '10.0.0.1',
        remotePort: 5,
        lastActive: Date.now(),
        attachment: Buffer.alloc(0),
      }),
    ).toBe(7 + WRITE_LEASE);
    const [one, two] = await Promise.all([kept.take('a10.0.0.1:5'), kept.take('a10.0.0.1:5')]);
    expect([one!.writeSeq, two!.writeSeq].sort((x, y) => x - y)).toEqual([7 + WRITE_LEASE, 7 + 2 * WRITE_LEASE]);
    expect(one!.writeLimit - one!.writeSeq).toBe(WRITE_LEASE);
    expect(one!.motion.replay).toEqual([3, 15, 0]);
    // the first holder's lease cannot be renewed: the session is someone else's now
    expect(await kept.renew('a10.0.0.1:5', 7 + WRITE_LEASE, one!.motion)).toBeNull();
    expect(await kept.take('a10.0.0.2:5')).toBeNull();
  });

  it("a kept state moved under another session's name (another device, another tenant) is refused and removed", async () => {
    const p = prefix();
    const kept = store(p);
    const keys = {
      suiteId: 0xc0a8,
      extendedMasterSecret: true,
      keyBlock: randomBytes(40),
      sessionId: randomBytes(32),
      pskIdentity: 'tenant-a-device',
      peerCertificates: [],
    };
    kept.established('a10.0.0.1:7', keys, {
      writeSeq: 1,
      replay: [1, 1, 0],
      remoteAddress: '10.0.0.1',
      remotePort: 7,
      lastActive: Date.now(),
      attachment: Buffer.alloc(0),
    });
    const fields = await redis.hgetallBuffer(kept.sessionKey('a10.0.0.1:7'));
    await redis.hset(kept.sessionKey('a10.0.0.9:7'), fields);
    expect(await kept.take('a10.0.0.9:7')).toBeNull();
    expect(await redis.exists(kept.sessionKey('a10.0.0.9:7'))).toBe(0);
    expect((await kept.take('a10.0.0.1:7'))?.keys.pskIdentity).toBe('tenant-a-device');
  });

  describe('handOver: a Connection ID session let go to another node', () => {
    /** A CidRouter that names no other node: records of CIDs not held here are kept for the test to look at. */
    function router() {
      const unclaimed: Array<{ cid: Buffer; datagram: Buffer; from: { address: string; port: number } }> = [];
      const route = {
        newCid: () => randomBytes(8),
        unclaimed: (cid: Buffer, datagram: Buffer, from: { address: string; port: number }) => void unclaimed.push({ cid, datagram, from }),
      };
      return { unclaimed, route };
    }

    it('writes the exact state and lets the session go; a record sent meanwhile waits and then follows it, and the next node carries it on from that state', async () => {
      const p = prefix();
      const a = await echoServer(p);
      const r = router();
      a.server.routeCids(r.route);
      const b = await echoServer(p);
      const c = await cidSession(a.port);
      const session = a.sessions[0];
      let announced!: () => void;
      const announce = new Promise<void>((resolve) => {
        announced = resolve;
      });
      const handing = a.server.handOver(session, () => announce);
      const before = a.received.length;
      c.send('two'); // reaches the owner while the state is being written: it waits
      await until(
        async () => a.received.length,
        (n) => n > before,
        'the record to reach the owner',
        2000,
      );
      await new Promise((res) => setTimeout(res, 50));
      expect(a.data).toEqual(['one']);
      expect(r.unclaimed).toEqual([]);
      announced();
      expect(await handing).toBe(true);
      expect(session.established).toBe(false);
      expect(a.server.sessionCount).toBe(0);
      // the waiting record went on to the router (which forwards it to the session's new node), with the device's address
      expect(r.unclaimed).toHaveLength(1);
      expect(r.unclaimed[0].cid).toEqual(session.connectionId);
      expect(r.unclaimed[0].from).toEqual({ address: '127.0.0.1', port: c.localPort });
      // another node claims it from the state written: the waiting record is answered there, in sequence
      expect(b.server.claimKept(r.unclaimed[0].cid, r.unclaimed[0].datagram, r.unclaimed[0].from)).toBe(true);
      const answer = await c.waitForData((x) => x === 'echo:two');
      expect(answer.localPort).toBe(c.localPort);
      expect(b.sessions[0].restored).toBe(true);
      expect(b.received.filter((d) => d[0] === 22)).toEqual([]); // no handshake
      expect(seq(b.sent[0])).toBe(seq(a.sent.at(-1)!) + 1); // sequence numbers go on where the owner stopped
      // and the session lives on there
      await c.moveTo(b.port);
      c.send('three');
      await c.waitForData((x) => x === 'echo:three');
      expect(b.data).toEqual(['two', 'three']);
    });

    it('counts the records in a row that came through one relay: records alternating between two relays, or one that comes directly, start it again', async () => {
      const a = await echoServer(prefix());
      a.server.routeCids(router().route);
      const c = await cidSession(a.port);
      const session = a.sessions[0];
      const answers: string[] = [];
      const relay = (name: string) => (d: Buffer) => void answers.push(`${name}:${d.length}`);
      const [viaB, viaC] = [relay('b'), relay('c')];
      let seq = 100;
      const relayed = (via: (d: Buffer) => void) =>
        a.server.receiveRelayed(c.sealApplicationData(`r${seq}`, seq++), { address: '127.0.0.1', port: c.localPort, relay: via });
      const streaks: number[] = [];
      for (const via of [viaB, viaC, viaB, viaC]) {
        expect(relayed(via)).toBe(true);
        streaks.push(session.relayStreak);
      }
      for (let i = 0; i < 3; i++) {
        relayed(viaB);
        streaks.push(session.relayStreak);
      }
      expect(streaks).toEqual([1, 1, 1, 1, 1, 2, 3]);
      expect(answers.filter((x) => x.startsWith('b:'))).toHaveLength(5); // each answered the way its record came
      c.sendRaw(c.sealApplicationData('direct', seq++)); // newer than the relayed ones, straight to the server
      await c.waitForData((x) => x === 'echo:direct');
      expect(session.relayStreak).toBe(0);
    });

    it('when its state cannot be written the session stays, and the record that waited is answered by it', async () => {
      const p = prefix();
      const kept = store(p);
      // Redis refuses the hand-over's write (after a moment, so a record arrives meanwhile)
      const failing = {
        established: kept.established.bind(kept),
        renew: kept.renew.bind(kept),
        forget: kept.forget.bind(kept),
        take: kept.take.bind(kept),
        saveAll: () => new Promise<number>((_, reject) => setTimeout(() => reject(new Error('Redis is down')), 200)),
      };
      const a = await startEchoServer({ keeper: failing, sharedCache: kept });
      servers.push(a);
      const r = router();
      a.server.routeCids(r.route);
      const keeperErrors: Error[] = [];
      a.server.on('keeperError', (err: Error) => keeperErrors.push(err));
      const c = await cidSession(a.port);
      const announce = { called: false };
      const handing = a.server.handOver(a.sessions[0], async () => {
        announce.called = true;
      });
      c.send('two');
      expect(await handing).toBe(false);
      await c.waitForData((x) => x === 'echo:two');
      expect(a.sessions[0].established).toBe(true);
      expect(announce.called).toBe(false);
      expect(r.unclaimed).toEqual([]);
      expect(keeperErrors.map((e) => e.message)).toEqual(['Redis is down']);
      c.send('three');
      await c.waitForData((x) => x === 'echo:three');
    });
  });
});
