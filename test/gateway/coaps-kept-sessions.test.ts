/**
 * DTLS sessions outlive the gateway process: a device keeps its session while the service restarts (SIGTERM, or
 * SIGKILL) on the same PostgreSQL and Redis, and a session made on one gateway resumes on another (openssl).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/app/db.ts';
import { encodeUint } from '../../src/coap/message.ts';
import { WRITE_LEASE } from '../../src/dtls/session-state.ts';
import { DtlsCoapPeer } from '../coap/support.ts';
import { connectivityClient, pskDevice } from '../support/provision.ts';
import { freePort } from '../support/ports.ts';
import { killServiceProcesses, startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

const HANDLER = `function handle(args: Arguments, exec: Exec) {
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  const m = body !== undefined && body.type === 'json' ? (body.data as { m: string }).m : '';
  exec.addLog('stored ' + m);
  return { statusCode: 200, body: { ok: true, m } };
}`;

/** Between the device and the gateway: forwards both ways from one fixed address:port, and records what passed. */
class UdpTap {
  readonly toGateway: Buffer[] = [];
  readonly toDevice: Buffer[] = [];
  readonly #device = dgram.createSocket('udp4');
  readonly #upstream = dgram.createSocket('udp4');
  #peer: dgram.RemoteInfo | undefined;
  readonly gatewayPort: number;

  constructor(gatewayPort: number) {
    this.gatewayPort = gatewayPort;
    this.#device.on('message', (d, rinfo) => {
      this.#peer = rinfo;
      this.toGateway.push(d);
      this.#upstream.send(d, gatewayPort, '127.0.0.1');
    });
    this.#upstream.on('message', (d) => {
      this.toDevice.push(d);
      if (this.#peer) this.#device.send(d, this.#peer.port, this.#peer.address);
    });
  }

  async start(): Promise<number> {
    await Promise.all([this.#device, this.#upstream].map((s) => new Promise<void>((r) => s.bind(0, '127.0.0.1', r))));
    return this.#device.address().port;
  }

  /** Sends a datagram the device sent before, again, from the same address:port. */
  replay(d: Buffer): void {
    this.#upstream.send(d, this.gatewayPort, '127.0.0.1');
  }

  close(): void {
    this.#device.close();
    this.#upstream.close();
  }
}

/** The record sequence number of an application_data record the gateway sent (no Connection ID: node-dtls-client offers none). */
const recordSeq = (d: Buffer): number => d.readUIntBE(5, 6);

/** gridgate_dtls_sessions_started_total of one process, by origin. */
async function sessionsStarted(base: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^gridgate_dtls_sessions_started_total\{origin="(\w+)"\} (\d+)/gm)) out[m[1]] = Number(m[2]);
  return out;
}

let db: Db;
let env: Record<string, string>;
beforeAll(async () => {
  const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-kept-'));
  env = {
    DATABASE_URL: process.env.DATABASE_URL!,
    DATA_DIR,
    QUEUE_NAME: `kept-${randomBytes(4).toString('hex')}`,
    LOG_LEVEL: 'info',
    // answers ride on the ACK even on a busy machine: one answer datagram per request
    COAP_PIGGYBACK_MS: '10000',
  };
  db = await openDb({ databaseUrl: env.DATABASE_URL, dataDir: DATA_DIR, migrate: false });
});
afterAll(async () => {
  killServiceProcesses();
  await db?.close();
});

/** A device (its handler logs and answers the marker it is sent) provisioned through `svc`. */
async function device(svc: ServiceProcess) {
  const api = await connectivityClient(db, svc.base);
  return pskDevice(api, HANDLER);
}

let nextMessageId = 100;
/** A Confirmable POST of `{ m }` on the peer's session; its answer. */
async function post(peer: DtlsCoapPeer, m: string): Promise<unknown> {
  const messageId = nextMessageId++;
  const answer = await peer.exchange({
    code: '0.02',
    token: randomBytes(4),
    messageId,
    payload: Buffer.from(JSON.stringify({ m })),
    options: [
      { name: 'Uri-Path', value: Buffer.from('report') },
      { name: 'Content-Format', value: encodeUint(50) },
    ],
  });
  expect(answer.code).toBe('2.05');
  return JSON.parse(answer.payload.toString());
}

/** How many handler runs of the device stored `m`. */
async function stored(deviceHashId: string, m: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1 AND a.log::text LIKE $2`,
    [deviceHashId, `%stored ${m}"%`],
  );
  return rows[0].n;
}

describe('a DTLS session outlives the gateway process', () => {
  it("SIGTERM: the device's next Confirmable POST on the same session is answered by the next process, with no handshake; a record from before is refused", async () => {
    const COAPS_PORT = String(await freePort());
    const a = await startServiceProcess({ ...env, COAPS_PORT });
    const dev = await device(a);
    const tap = new UdpTap(Number(COAPS_PORT));
    const peer = await DtlsCoapPeer.connect(await tap.start(), dev.identity, dev.key);
    try {
      const sent = tap.toGateway.length;
      expect(await post(peer, 'before')).toEqual({ ok: true, m: 'before' });
      const captured = tap.toGateway[sent]; // the POST (its first transmission)
      expect(await sessionsStarted(a.base)).toEqual({ handshake: 1 });
      a.child.kill('SIGTERM');
      expect(await a.exited).toBe(0);
      expect(a.stdout()).toMatch(/"sessions":1,"msg":"coaps sessions kept for the next process"/);

      const b = await startServiceProcess({ ...env, COAPS_PORT });
      const answered = tap.toDevice.length;
      const lastSeq = recordSeq(tap.toDevice[answered - 1]);
      expect(await post(peer, 'after')).toEqual({ ok: true, m: 'after' });
      expect(await stored(dev.hashId, 'after')).toBe(1);
      // carried on, not shaken hands again; its sequence numbers continue where the first process stopped
      expect(await sessionsStarted(b.base)).toEqual({ kept: 1 });
      expect(recordSeq(tap.toDevice[answered])).toBe(lastSeq + 1);

      // the POST captured before the restart, sent again from the device's address: refused (not run, not answered)
      tap.replay(captured);
      expect(await post(peer, 'later')).toEqual({ ok: true, m: 'later' });
      expect(await stored(dev.hashId, 'later')).toBe(1);
      expect(await stored(dev.hashId, 'before')).toBe(1);
      b.child.kill('SIGTERM');
      expect(await b.exited).toBe(0);
    } finally {
      peer.close();
      tap.close();
    }
  }, 120_000);

  it('SIGTERM: a retransmission of the last request, its answer lost, gets the same answer from the next process and is not run again', async () => {
    const COAPS_PORT = String(await freePort());
    const a = await startServiceProcess({ ...env, COAPS_PORT });
    const dev = await device(a);
    const peer = await DtlsCoapPeer.connect(Number(COAPS_PORT), dev.identity, dev.key);
    try {
      const last = {
        code: '0.02',
        token: randomBytes(4),
        messageId: nextMessageId++,
        payload: Buffer.from(JSON.stringify({ m: 'once' })),
        options: [
          { name: 'Uri-Path', value: Buffer.from('report') },
          { name: 'Content-Format', value: encodeUint(50) },
        ],
      };
      expect(JSON.parse((await peer.exchange(last)).payload.toString())).toEqual({ ok: true, m: 'once' });
      a.child.kill('SIGTERM');
      expect(await a.exited).toBe(0);
      const b = await startServiceProcess({ ...env, COAPS_PORT });
      // as if the answer had never arrived: the same message id and token again, on the session the next process carries on
      peer.received.length = 0;
      const again = await peer.exchange(last);
      expect(again.code).toBe('2.05');
      expect(JSON.parse(again.payload.toString())).toEqual({ ok: true, m: 'once' });
      expect(await sessionsStarted(b.base)).toEqual({ kept: 1 });
      expect(await post(peer, 'next')).toEqual({ ok: true, m: 'next' });
      expect(await stored(dev.hashId, 'next')).toBe(1);
      expect(await stored(dev.hashId, 'once')).toBe(1);
      b.child.kill('SIGTERM');
      expect(await b.exited).toBe(0);
    } finally {
      peer.close();
    }
  }, 120_000);

  it('SIGKILL: a session kept at its handshake still answers on the next process, its sequence numbers past any the killed one had leased', async () => {
    const COAPS_PORT = String(await freePort());
    const a = await startServiceProcess({ ...env, COAPS_PORT });
    const dev = await device(a);
    const tap = new UdpTap(Number(COAPS_PORT));
    const peer = await DtlsCoapPeer.connect(await tap.start(), dev.identity, dev.key);
    try {
      expect(await post(peer, 'k1')).toEqual({ ok: true, m: 'k1' });
      a.child.kill('SIGKILL');
      await a.exited;
      const answered = tap.toDevice.length;
      const lastSeq = recordSeq(tap.toDevice[answered - 1]);
      const b = await startServiceProcess({ ...env, COAPS_PORT });
      expect(await post(peer, 'k2')).toEqual({ ok: true, m: 'k2' });
      expect(await stored(dev.hashId, 'k2')).toBe(1);
      expect(await sessionsStarted(b.base)).toEqual({ kept: 1 });
      // past every number the killed process had leased, and close enough for the device to take it
      const first = recordSeq(tap.toDevice[answered]);
      expect(first).toBeGreaterThan(lastSeq);
      expect(first - lastSeq).toBeLessThanOrEqual(WRITE_LEASE);
      b.child.kill('SIGTERM');
      expect(await b.exited).toBe(0);
    } finally {
      peer.close();
      tap.close();
    }
  }, 120_000);

  it('DTLS_KEEP_SESSIONS=off: the next process does not know the session (the device must handshake again)', async () => {
    const COAPS_PORT = String(await freePort());
    const off = { ...env, COAPS_PORT, DTLS_KEEP_SESSIONS: 'off' };
    const a = await startServiceProcess(off);
    const dev = await device(a);
    const peer = await DtlsCoapPeer.connect(Number(COAPS_PORT), dev.identity, dev.key);
    try {
      expect(await post(peer, 'o1')).toEqual({ ok: true, m: 'o1' });
      a.child.kill('SIGTERM');
      await a.exited;
      const b = await startServiceProcess(off);
      await expect(
        peer.exchange(
          {
            code: '0.02',
            token: randomBytes(4),
            messageId: nextMessageId++,
            payload: Buffer.from('{"m":"o2"}'),
            options: [{ name: 'Uri-Path', value: Buffer.from('report') }],
          },
          5_000,
        ),
      ).rejects.toThrow(/no CoAP answer/);
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      peer.close();
    }
  }, 120_000);
});

/** openssl s_client with a PSK and `args`, stdin closed at once: it completes the handshake and leaves. */
function sClient(port: number, dev: { identity: string; key: Buffer }, args: string[]): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn(
      'openssl',
      [
        's_client',
        '-dtls1_2',
        '-connect',
        `127.0.0.1:${port}`,
        '-psk',
        dev.key.toString('hex'),
        '-psk_identity',
        dev.identity,
        '-cipher',
        'PSK-AES128-CCM8:@SECLEVEL=0',
        ...args,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}

describe('any gateway node resumes any session', () => {
  it('openssl -sess_out against one gateway process, -sess_in against another on the same stores: Reused', async () => {
    const [portA, portB] = [String(await freePort()), String(await freePort())];
    const a = await startServiceProcess({ ...env, COAPS_PORT: portA });
    const b = await startServiceProcess({ ...env, COAPS_PORT: portB });
    const dev = await device(a);
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'kept-sess-')), 'session.pem');
    expect(await sClient(Number(portA), dev, ['-sess_out', file])).toContain('New, ');
    expect(await sClient(Number(portB), dev, ['-sess_in', file])).toContain('Reused, ');
    expect(await sessionsStarted(b.base)).toEqual({ resumption: 1 });
    for (const p of [a, b]) p.child.kill('SIGTERM');
    await Promise.all([a.exited, b.exited]);
  }, 120_000);
});
