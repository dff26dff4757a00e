import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createPskTlsServer, PskTlsConnection } from '../../src/tls/index.ts';
import type { TlsClientErrorInfo } from '../../src/tls/index.ts';
import { encodeClientHello, encodeHandshake } from '../../src/tls/messages.ts';
import { encodePlaintextRecord } from '../../src/tls/record.ts';
import { MAX_PSK_IDENTITY_BYTES } from '../../src/tls/psk.ts';
import { until } from '../support/until.ts';
import { TestClient, bodies, portOf, sClient } from './helpers.ts';

const PSK_HEX = '5f3c2a1b0e9d8c7b6a5948372615f4e3';
const PSK = Buffer.from(PSK_HEX, 'hex');
const IDENTITY = 'device-0042';

const OPENSSL_CIPHERS: Record<string, string> = {
  TLS_PSK_WITH_AES_128_CCM_8: 'PSK-AES128-CCM8:@SECLEVEL=0',
  TLS_PSK_WITH_AES_128_GCM_SHA256: 'PSK-AES128-GCM-SHA256',
  TLS_PSK_WITH_AES_128_CBC_SHA256: 'PSK-AES128-CBC-SHA256',
};

interface Harness {
  tls: net.Server;
  httpServer: http.Server;
  port: number;
  secure: PskTlsConnection[];
  errors: Array<{ err: Error; info: TlsClientErrorInfo }>;
  lookups: string[];
  close(): Promise<void>;
}

async function startHarness(opts: { handshakeTimeoutMs?: number; lookupDelayMs?: number } = {}): Promise<Harness> {
  const secure: PskTlsConnection[] = [];
  const errors: Harness['errors'] = [];
  const lookups: string[] = [];
  const tls = createPskTlsServer({
    handshakeTimeoutMs: opts.handshakeTimeoutMs,
    lookupPsk: async (identity) => {
      lookups.push(identity);
      // async lookup: resolve on a later turn (and optionally after a delay) like a DB/Redis lookup would
      await new Promise((r) => setTimeout(r, opts.lookupDelayMs ?? 1));
      return identity === IDENTITY ? PSK : null;
    },
  });
  const perConn = new WeakMap<object, number>();
  const httpServer = http.createServer((req, res) => {
    const n = (perConn.get(req.socket) ?? 0) + 1;
    perConn.set(req.socket, n);
    const c = req.socket as unknown as PskTlsConnection;
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => {
      res.setHeader('content-type', 'text/plain');
      if (req.url === '/big') {
        res.end('y'.repeat(100_000) + 'END');
        return;
      }
      res.end(
        `BODY<n=${n} url=${req.url} id=${c.pskIdentity} suite=${c.cipherSuite} ems=${c.extendedMasterSecret} ` + `port=${c.remotePort} len=${body.length}>\n`,
      );
    });
  });
  tls.on('secureConnection', (c: PskTlsConnection) => {
    secure.push(c);
    httpServer.emit('connection', c);
  });
  tls.on('tlsClientError', (err: Error, info: TlsClientErrorInfo) => errors.push({ err, info }));
  tls.listen(0, '127.0.0.1');
  await once(tls, 'listening');
  return {
    tls,
    httpServer,
    port: portOf(tls),
    secure,
    errors,
    lookups,
    close: async () => {
      httpServer.closeAllConnections();
      await new Promise<void>((r) => tls.close(() => r()));
    },
  };
}

const get = (path: string, close = false) => `GET ${path} HTTP/1.1\r\nHost: gw\r\n${close ? 'Connection: close\r\n' : ''}\r\n`;

describe('PSK TLS server ↔ openssl s_client, HTTP through node:http', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());
  afterEach(() => {
    h.secure.length = 0;
    h.errors.length = 0;
  });

  for (const [suite, cipher] of Object.entries(OPENSSL_CIPHERS)) {
    it(`${suite}: HTTP request/response body round-trips, EMS negotiated`, async () => {
      const r = await sClient({ port: h.port, identity: IDENTITY, pskHex: PSK_HEX, cipher, input: get('/hello', true) });
      expect(bodies(r.stdout)).toEqual([`n=1 url=/hello id=${IDENTITY} suite=${suite} ems=true port=${h.secure[0]?.remotePort} len=0`]);
      expect(h.secure).toHaveLength(1);
      expect(h.secure[0].cipherSuite).toBe(suite);
      expect(h.secure[0].extendedMasterSecret).toBe(true);
      expect(h.secure[0].secureRenegotiation).toBe(true);
      expect(h.errors).toEqual([]);
    });
  }

  it('POST with a body larger than one record (64 KiB) arrives intact', async () => {
    const payload = 'x'.repeat(65536);
    const req = `POST /up HTTP/1.1\r\nHost: gw\r\nContent-Length: ${payload.length}\r\nConnection: close\r\n\r\n${payload}`;
    const r = await sClient({ port: h.port, identity: IDENTITY, pskHex: PSK_HEX, cipher: OPENSSL_CIPHERS.TLS_PSK_WITH_AES_128_GCM_SHA256, input: req });
    expect(bodies(r.stdout)[0]).toContain('len=65536');
  });

  it('response larger than one record (100 KB) arrives intact', async () => {
    const r = await sClient({
      port: h.port,
      identity: IDENTITY,
      pskHex: PSK_HEX,
      cipher: OPENSSL_CIPHERS.TLS_PSK_WITH_AES_128_CCM_8,
      input: get('/big', true),
    });
    const body = r.stdout.slice(r.stdout.indexOf('\r\n\r\n') + 4);
    expect(body).toBe('y'.repeat(100_000) + 'END');
  });

  it('without extended_master_secret (openssl Options = -ExtendedMasterSecret) the legacy master secret works', async () => {
    // openssl 3.0 s_client has no -no_ems flag; the SSL_CONF "Options" setting does the same thing.
    const dir = mkdtempSync(join(tmpdir(), 'tls-noems-'));
    const cnf = join(dir, 'openssl.cnf');
    writeFileSync(
      cnf,
      [
        'openssl_conf = openssl_init',
        '[openssl_init]',
        'ssl_conf = ssl_sect',
        '[ssl_sect]',
        'system_default = system_default_sect',
        '[system_default_sect]',
        'Options = -ExtendedMasterSecret',
        '',
      ].join('\n'),
    );
    for (const [suite, cipher] of Object.entries(OPENSSL_CIPHERS)) {
      h.secure.length = 0;
      const r = await sClient({ port: h.port, identity: IDENTITY, pskHex: PSK_HEX, cipher, input: get('/noems', true), env: { OPENSSL_CONF: cnf } });
      expect(bodies(r.stdout)[0]).toMatch(new RegExp(`^n=1 url=/noems .* suite=${suite} ems=false `));
      expect(h.secure[0].extendedMasterSecret).toBe(false);
    }
  });

  it('keep-alive: several pipelined requests on one connection, one handshake', async () => {
    const input = [1, 2, 3, 4, 5].map((i) => get(`/p${i}`, i === 5)).join('');
    const r = await sClient({ port: h.port, identity: IDENTITY, pskHex: PSK_HEX, cipher: OPENSSL_CIPHERS.TLS_PSK_WITH_AES_128_CCM_8, input });
    const b = bodies(r.stdout);
    expect(b.map((x) => x.split(' ').slice(0, 2).join(' '))).toEqual(['n=1 url=/p1', 'n=2 url=/p2', 'n=3 url=/p3', 'n=4 url=/p4', 'n=5 url=/p5']);
    expect(new Set(b.map((x) => x.match(/port=\d+/)![0])).size).toBe(1);
    expect(h.secure).toHaveLength(1);
  });

  it('keep-alive: sequential request/response turns on one connection (each request sent after the previous answer)', async () => {
    const total = 4;
    let sent = 1;
    const r = await sClient({
      port: h.port,
      identity: IDENTITY,
      pskHex: PSK_HEX,
      cipher: OPENSSL_CIPHERS.TLS_PSK_WITH_AES_128_CBC_SHA256,
      onSpawn: (child) => child.stdin.write(get('/s1')),
      onStdout: (out, child) => {
        if (bodies(out).length === sent && sent < total) {
          sent++;
          child.stdin.write(get(`/s${sent}`, sent === total));
        }
      },
    });
    expect(bodies(r.stdout).map((x) => x.split(' ').slice(0, 2).join(' '))).toEqual(['n=1 url=/s1', 'n=2 url=/s2', 'n=3 url=/s3', 'n=4 url=/s4']);
    expect(h.secure).toHaveLength(1);
  });

  for (const [suite, cipher] of Object.entries(OPENSSL_CIPHERS)) {
    it(`unknown identity (${suite}): openssl sees the same alert as for a wrong key, tlsClientError says unknown`, async () => {
      const alertOf = (stderr: string) => stderr.match(/alert ([a-z ]+?)(?::|\n|$)/i)?.[1];
      const wrong = await sClient({ port: h.port, identity: IDENTITY, pskHex: 'ff' + PSK_HEX.slice(2), cipher, input: get('/', true) });
      h.errors.length = 0;
      const unknown = await sClient({ port: h.port, identity: 'nobody', pskHex: PSK_HEX, cipher, input: get('/', true) });
      expect(alertOf(wrong.stderr)).toMatch(/bad record mac/i);
      expect(alertOf(unknown.stderr)).toBe(alertOf(wrong.stderr));
      expect(bodies(unknown.stdout)).toEqual([]);
      expect(h.secure).toHaveLength(0);
      expect(h.errors).toHaveLength(1);
      expect(h.errors[0].info).toMatchObject({ remoteAddress: '127.0.0.1', pskIdentity: 'nobody' });
      expect(h.errors[0].err.message).toMatch(/^unknown PSK identity "nobody"/);
    });
  }

  for (const [suite, cipher] of Object.entries(OPENSSL_CIPHERS)) {
    it(`wrong key (${suite}): handshake fails with an alert, tlsClientError, no secureConnection`, async () => {
      const r = await sClient({ port: h.port, identity: IDENTITY, pskHex: 'ff' + PSK_HEX.slice(2), cipher, input: get('/', true) });
      expect(r.stderr).toMatch(/alert (bad record mac|decrypt error)/i);
      expect(bodies(r.stdout)).toEqual([]);
      expect(h.secure).toHaveLength(0);
      expect(h.errors).toHaveLength(1);
      expect(h.errors[0].info.pskIdentity).toBe(IDENTITY);
    });
  }

  it('no shared cipher suite → handshake_failure', async () => {
    const r = await sClient({ port: h.port, identity: IDENTITY, pskHex: PSK_HEX, cipher: 'PSK-AES256-GCM-SHA384', input: get('/', true) });
    expect(r.stderr).toMatch(/alert handshake failure/i);
    expect(h.errors[0].err.message).toMatch(/no shared cipher suite/);
  });

  it('TLS 1.1 client → protocol_version', async () => {
    const r = await sClient({
      port: h.port,
      identity: IDENTITY,
      pskHex: PSK_HEX,
      cipher: 'PSK-AES128-CBC-SHA:@SECLEVEL=0',
      input: get('/', true),
      version: '-tls1_1',
    });
    expect(r.stderr).toMatch(/alert protocol version/i);
    expect(h.errors.some((e) => /TLS 1\.2/.test(e.err.message))).toBe(true);
    expect(h.secure).toHaveLength(0);
  });
});

describe('handshake framing with a client built on our primitives', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ lookupDelayMs: 20 });
  });
  afterAll(() => h.close());

  async function httpOver(c: TestClient, path: string): Promise<string> {
    c.send(23, Buffer.from(get(path)));
    let text = '';
    while (!text.includes('>\n')) {
      const rec = await c.recv();
      expect(rec.type).toBe(23);
      text += rec.data.toString();
    }
    return bodies(text)[0];
  }

  it('handshake messages fragmented into 1-byte records', async () => {
    const c = await TestClient.connect(h.port);
    await c.handshake({ identity: IDENTITY, psk: PSK, fragment: 1, suites: [0x00a8] });
    expect(await httpOver(c, '/frag')).toMatch(/^n=1 url=\/frag .*suite=TLS_PSK_WITH_AES_128_GCM_SHA256 ems=true/);
    c.socket.destroy();
  });

  it('whole second flight (CKE, CCS, Finished) in one TCP segment while the PSK lookup is pending', async () => {
    const c = await TestClient.connect(h.port);
    await c.handshake({ identity: IDENTITY, psk: PSK, coalesce: true, ems: false });
    expect(await httpOver(c, '/co')).toMatch(/suite=TLS_PSK_WITH_AES_128_CCM_8 ems=false/);
    c.socket.destroy();
  });

  it(`an identity of ${MAX_PSK_IDENTITY_BYTES} bytes is looked up`, async () => {
    const identity = 'i'.repeat(MAX_PSK_IDENTITY_BYTES);
    const c = await TestClient.connect(h.port);
    await expect(c.handshake({ identity, psk: PSK })).rejects.toThrow(/^alert 20$/);
    expect(h.lookups).toContain(identity);
    c.socket.destroy();
  });

  it(`a longer identity is not looked up, and fails as a wrong key does (bad_record_mac after the client's Finished)`, async () => {
    const identity = 'i'.repeat(MAX_PSK_IDENTITY_BYTES + 1);
    h.errors.length = 0;
    const c = await TestClient.connect(h.port);
    await expect(c.handshake({ identity, psk: PSK })).rejects.toThrow(/^alert 20$/);
    await c.waitClose();
    expect(h.lookups).not.toContain(identity);
    await until(
      async () => h.errors.length,
      (n) => n === 1,
      'the failed handshake reported',
    );
    expect(h.errors[0].info.pskIdentity).toBeUndefined();
    expect(h.errors[0].err.message).toMatch(`PSK identity of ${MAX_PSK_IDENTITY_BYTES + 1} bytes`);
  });

  it('reads nothing more from the peer while its PSK lookup runs, and finishes the handshake after it', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let lookupStarted = false;
    const server = createPskTlsServer({
      lookupPsk: async () => {
        lookupStarted = true;
        await held;
        return PSK;
      },
    });
    const raw: net.Socket[] = [];
    server.on('connection', (s: net.Socket) => raw.push(s));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const c = await TestClient.connect(portOf(server));
      const handshake = c.handshake({ identity: IDENTITY, psk: PSK });
      await until(
        async () => lookupStarted,
        (v) => v,
        'the PSK lookup to start',
      );
      expect(raw[0].isPaused()).toBe(true);
      release();
      await handshake;
      expect(raw[0].isPaused()).toBe(false);
      c.socket.destroy();
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('renegotiation attempt gets a no_renegotiation warning and the connection keeps working', async () => {
    const c = await TestClient.connect(h.port);
    await c.handshake({ identity: IDENTITY, psk: PSK });
    const ch = encodeHandshake(
      1,
      encodeClientHello({
        clientVersion: 0x0303,
        random: randomBytes(32),
        sessionId: Buffer.alloc(0),
        cipherSuites: [0xc0a8],
        compressionMethods: Buffer.from([0]),
        extensions: [{ type: 0xff01, data: Buffer.from([12, ...randomBytes(12)]) }],
      }),
    );
    c.send(22, ch);
    const alert = await c.recv();
    expect(alert.type).toBe(21);
    expect([...alert.data]).toEqual([1, 100]);
    expect(await httpOver(c, '/after-reneg')).toMatch(/^n=1 url=\/after-reneg/);
    c.socket.destroy();
  });

  it('close_notify from the client is answered with close_notify and the TCP connection ends', async () => {
    const c = await TestClient.connect(h.port);
    await c.handshake({ identity: IDENTITY, psk: PSK, suites: [0x00ae] });
    expect(await httpOver(c, '/bye')).toMatch(/^n=1 url=\/bye/);
    c.send(21, Buffer.from([1, 0]));
    const reply = await c.recv();
    expect(reply.type).toBe(21);
    expect([...reply.data]).toEqual([1, 0]);
    await c.waitClose();
  });

  it('fatal alert from the peer after the handshake closes the connection', async () => {
    const c = await TestClient.connect(h.port);
    await c.handshake({ identity: IDENTITY, psk: PSK });
    await new Promise((r) => setImmediate(r));
    const conn = h.secure.at(-1)!;
    let error: Error | undefined;
    conn.on('error', (e) => (error = e));
    const closed = new Promise((r) => conn.once('close', r));
    c.send(21, Buffer.from([2, 80]));
    await closed;
    expect(error?.message).toMatch(/fatal alert internal_error/);
    await c.waitClose();
  });

  it('application data before the handshake completes is a fatal unexpected_message', async () => {
    const c = await TestClient.connect(h.port);
    c.socket.write(encodePlaintextRecord(23, 0x0303, Buffer.from('GET / HTTP/1.1\r\n\r\n')));
    const rec = await c.recv();
    expect(rec.type).toBe(21);
    expect([...rec.data]).toEqual([2, 10]);
    await c.waitClose();
  });
});

describe('robustness', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ handshakeTimeoutMs: 400 });
  });
  afterAll(() => h.close());

  function validClientHelloRecord(): Buffer {
    const ch = encodeHandshake(
      1,
      encodeClientHello({
        clientVersion: 0x0303,
        random: randomBytes(32),
        sessionId: randomBytes(32),
        cipherSuites: [0xc0a8, 0x00a8, 0x00ae, 0x00ff],
        compressionMethods: Buffer.from([0]),
        extensions: [
          { type: 23, data: Buffer.alloc(0) },
          { type: 22, data: Buffer.alloc(0) },
          { type: 0xff01, data: Buffer.from([0]) },
        ],
      }),
    );
    return encodePlaintextRecord(22, 0x0301, ch);
  }

  /** Sends bytes, then waits until the server closes the connection (a hang fails by the test's timeout). */
  async function throwAt(bytes: Buffer, endAfterWrite = false): Promise<void> {
    const s = net.connect(h.port, '127.0.0.1');
    s.on('error', () => {});
    s.on('data', () => {});
    await once(s, 'connect');
    s.write(bytes);
    if (endAfterWrite) s.end();
    await once(s, 'close');
  }

  /** The errors the server reported while `work` ran. */
  async function errorsDuring(work: () => Promise<void>): Promise<string[]> {
    const before = h.errors.length;
    await work();
    return h.errors.slice(before).map((e) => e.err.message);
  }

  it('random garbage, truncated and mutated ClientHellos close the connection; the server keeps serving', async () => {
    const cases: Buffer[] = [];
    for (let i = 0; i < 30; i++) cases.push(randomBytes(1 + Math.floor(Math.random() * 3000)));
    cases.push(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    cases.push(Buffer.from([0x80, 0x2e, 0x01, 0x03, 0x01])); // SSLv2-style hello header
    cases.push(Buffer.from([22, 3, 3, 0xff, 0xff])); // record_overflow
    cases.push(Buffer.from([22, 3, 3, 0, 0])); // empty handshake record
    cases.push(Buffer.from([20, 3, 3, 0, 1, 1])); // early CCS
    const good = validClientHelloRecord();
    for (let n = 1; n < good.length; n += 7) cases.push(good.subarray(0, n)); // truncated (server waits → timeout)
    for (let i = 0; i < 200; i++) {
      const m = Buffer.from(good);
      const flips = 1 + Math.floor(Math.random() * 4);
      for (let f = 0; f < flips; f++) m[Math.floor(Math.random() * m.length)] = Math.floor(Math.random() * 256);
      cases.push(m);
    }
    // mutated length fields inside the ClientHello body
    for (const off of [5 + 1, 5 + 4 + 2 + 32, 5 + 4 + 2 + 32 + 1 + 32, 5 + 4 + 2 + 32 + 1 + 32 + 1]) {
      for (const v of [0x00, 0x7f, 0xff]) {
        const m = Buffer.from(good);
        m[off] = v;
        cases.push(m);
      }
    }
    // Everything closes: bad input at once, stalled (truncated / accidentally valid) input at the 400 ms timeout.
    await Promise.all(cases.map((c, i) => throwAt(c, i % 3 === 0)));
    expect(h.secure).toHaveLength(0);
    expect(h.errors.length).toBeGreaterThan(cases.length / 2);

    const r = await sClient({
      port: h.port,
      identity: IDENTITY,
      pskHex: PSK_HEX,
      cipher: OPENSSL_CIPHERS.TLS_PSK_WITH_AES_128_CCM_8,
      input: get('/still-alive', true),
    });
    expect(bodies(r.stdout)[0]).toMatch(/^n=1 url=\/still-alive/);
  });

  // closed by the handshake timer and by nothing else: its error is the timeout, the only one of the connection
  it('a client that connects and sends nothing is closed by the handshake timeout', async () => {
    expect(await errorsDuring(() => throwAt(Buffer.alloc(0)))).toEqual(['TLS handshake timeout']);
  });

  it('a client that stalls after ClientHello is closed by the handshake timeout', async () => {
    expect(await errorsDuring(() => throwAt(validClientHelloRecord()))).toEqual(['TLS handshake timeout']);
  });
});
