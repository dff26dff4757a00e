/** Session resumption by session id (abbreviated handshake) against openssl s_client -sess_out / -sess_in. */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { dtlsClient, startEchoServer, waitFor, IDENTITY, PSK_HEX } from './helpers.ts';
import type { EchoServer } from './helpers.ts';
import { HandClient, RawPeer, clientHello } from './raw-client.ts';
import { negotiate } from '../../src/dtls/flights/flight4.ts';
import { SessionCache } from '../../src/dtls/session-cache.ts';
import type { ClientHello } from '../../src/tls/messages.ts';
import { CIPHER_SUITES } from '../../src/tls/suites/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'dtls-resume-'));
let srv: EchoServer | undefined;
afterEach(async () => {
  await srv?.server.close();
  srv = undefined;
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CCM8 = 'PSK-AES128-CCM8:@SECLEVEL=0';

describe('DTLS session resumption ↔ openssl s_client -sess_out/-sess_in', () => {
  it('a second connection resumes the first session ("Reused"), keeps the PSK identity, and data flows', async () => {
    srv = await startEchoServer();
    const file = join(dir, 'a.pem');
    const first = await dtlsClient({ port: srv.port, cipher: CCM8, line: 'first', extraArgs: ['-sess_out', file], closeNotify: true });
    expect(first.stdout).toContain('echo:first\n');
    expect(first.stdout).toContain('New, ');
    const second = await dtlsClient({ port: srv.port, cipher: CCM8, line: 'second', extraArgs: ['-sess_in', file], closeNotify: true });
    expect(second.stdout).toContain('Reused, ');
    expect(second.stdout).toContain('echo:second\n');
    await waitFor(() => srv!.sessions.length === 2);
    expect(srv.sessions.map((s) => s.resumed)).toEqual([false, true]);
    expect(srv.sessions[1].pskIdentity).toBe(IDENTITY);
    expect(srv.sessions[1].sessionId).toEqual(srv.sessions[0].sessionId);
    expect(srv.sessions[1].cipherSuite).toBe('TLS_PSK_WITH_AES_128_CCM_8');
    expect(srv.errors).toEqual([]);
  });

  it('an expired session is not resumed: a full handshake follows and data still flows', async () => {
    srv = await startEchoServer({ sessionLifetimeMs: 200 });
    const file = join(dir, 'b.pem');
    const first = await dtlsClient({ port: srv.port, cipher: CCM8, line: 'one', extraArgs: ['-sess_out', file], closeNotify: true });
    expect(first.echoed).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    const second = await dtlsClient({ port: srv.port, cipher: CCM8, line: 'two', extraArgs: ['-sess_in', file], closeNotify: true });
    expect(second.stdout).toContain('New, ');
    expect(second.stdout).toContain('echo:two\n');
    expect(srv.sessions.map((s) => s.resumed)).toEqual([false, false]);
  });

  it('a PSK session is not resumed once its identity has another key or is gone: full handshake, and the lookup decides', async () => {
    const keys = new Map([[IDENTITY, Buffer.from(PSK_HEX, 'hex')]]);
    srv = await startEchoServer({ lookupPsk: async (id) => keys.get(id) ?? null });
    const file = join(dir, 'd.pem');
    expect((await dtlsClient({ port: srv.port, cipher: CCM8, line: 'a', extraArgs: ['-sess_out', file], closeNotify: true })).echoed).toBe(true);
    // unchanged key: resumed
    const same = await dtlsClient({ port: srv.port, cipher: CCM8, line: 'b', extraArgs: ['-sess_in', file], closeNotify: true });
    expect(same.stdout).toContain('Reused, ');
    expect(same.echoed).toBe(true);
    // the device got a new key: the cached session is dropped, the client's new key works in a full handshake
    const newKey = 'aabbccddeeff00112233445566778899';
    keys.set(IDENTITY, Buffer.from(newKey, 'hex'));
    const rekeyed = await dtlsClient({ port: srv.port, cipher: CCM8, line: 'c', pskHex: newKey, extraArgs: ['-sess_in', file], closeNotify: true });
    expect(rekeyed.stdout).toContain('New, ');
    expect(rekeyed.echoed).toBe(true);
    // the device is deleted: no resumption, and the full handshake fails as for a wrong key
    keys.clear();
    const gone = await dtlsClient({ port: srv.port, cipher: CCM8, line: 'd', pskHex: newKey, extraArgs: ['-sess_in', file], timeoutMs: 3000 });
    expect(gone.echoed).toBe(false);
    expect(gone.stderr).toContain('bad record mac');
    expect(srv.sessions.map((s) => s.resumed)).toEqual([false, true, false]);
  });

  it('sessionCacheSize 0 disables resumption', async () => {
    srv = await startEchoServer({ sessionCacheSize: 0 });
    const file = join(dir, 'c.pem');
    expect((await dtlsClient({ port: srv.port, cipher: CCM8, extraArgs: ['-sess_out', file], closeNotify: true })).echoed).toBe(true);
    const second = await dtlsClient({ port: srv.port, cipher: CCM8, extraArgs: ['-sess_in', file], closeNotify: true });
    expect(second.stdout).toContain('New, ');
    expect(second.echoed).toBe(true);
  });
});

describe('resumption decisions (RFC 7627 §5.3) and the session cache', () => {
  const cache = new SessionCache(2, 60_000);
  const opts = { suites: CIPHER_SUITES, cache, stillValid: () => true };
  const entry = (ems: boolean) => ({ masterSecret: randomBytes(48), suiteId: 0xc0a8, extendedMasterSecret: ems, pskIdentity: 'd', peerCertificates: [] });
  const hello = (sessionId: Buffer, ems: boolean): ClientHello => ({
    ...clientHello(),
    sessionId,
    cipherSuites: [0x00a8, 0xc0a8],
    extensions: ems ? [{ type: 23, data: Buffer.alloc(0) }] : [],
  });

  it('resumes when the EMS state matches, with the cached suite and the same session id', () => {
    const id = cache.newId();
    cache.store(id, entry(true));
    const n = negotiate(hello(id, true), opts);
    expect(n.resumed?.pskIdentity).toBe('d');
    expect(n.suite.id).toBe(0xc0a8); // the cached suite, not the server's first choice
    expect(n.sessionId).toEqual(id);
  });

  it('an EMS session offered without EMS: handshake_failure; a non-EMS session offered with EMS: full handshake', () => {
    const a = cache.newId();
    cache.store(a, entry(true));
    expect(() => negotiate(hello(a, false), opts)).toThrow(expect.objectContaining({ description: 40 }));
    const b = cache.newId();
    cache.store(b, entry(false));
    const n = negotiate(hello(b, true), opts);
    expect(n.resumed).toBeUndefined();
    expect(n.sessionId).not.toEqual(b);
    expect(n.sessionId).toHaveLength(32);
  });

  it('unknown, short, long-garbage and no-longer-valid ids give a full handshake with a new id', () => {
    const id = cache.newId();
    cache.store(id, entry(true));
    for (const sid of [randomBytes(32), randomBytes(5), Buffer.alloc(0)]) {
      const n = negotiate(hello(sid, true), opts);
      expect(n.resumed).toBeUndefined();
      expect(n.sessionId).toHaveLength(32);
    }
    expect(negotiate(hello(id, true), { ...opts, stillValid: () => false }).resumed).toBeUndefined();
  });

  it('is bounded (the oldest entry goes) and entries expire', () => {
    const c = new SessionCache(2, 1000);
    const [a, b, d] = [c.newId(), c.newId(), c.newId()];
    c.store(a, entry(true), 0);
    c.store(b, entry(true), 0);
    c.store(d, entry(true), 0);
    expect(c.size).toBe(2);
    expect(c.get(a, 10)).toBeUndefined();
    expect(c.get(b, 999)).toBeDefined();
    expect(c.get(b, 1000)).toBeUndefined();
    expect(c.size).toBe(1);
  });
});

describe('abbreviated handshake driven by hand', () => {
  const peers: RawPeer[] = [];
  afterEach(() => {
    for (const p of peers.splice(0)) p.close();
  });

  async function peer(port: number): Promise<RawPeer> {
    const p = await new RawPeer(port).open();
    peers.push(p);
    return p;
  }

  /** A full PSK handshake with EMS; the client knows the master secret and the session id the server issued. */
  async function fullHandshake(port: number): Promise<HandClient> {
    const p = await peer(port);
    const h = new HandClient(p);
    await h.hello();
    p.send(Buffer.concat(h.flight5()));
    await p.take((d) => d.records.some((r) => r.epoch === 1));
    return h;
  }

  it('flight 4b is ServerHello + CCS + Finished, retransmitted on its timer; the client Finished resumes the session', async () => {
    srv = await startEchoServer();
    const full = await fullHandshake(srv.port);
    await waitFor(() => srv!.sessions.length === 1);
    expect(full.sessionId).toHaveLength(32);

    const p = await peer(srv.port);
    const resume = new HandClient(p, { sessionId: full.sessionId });
    const first = await resume.hello();
    expect(first.records.map((r) => [r.type, r.epoch])).toEqual([
      [22, 0],
      [20, 0],
      [22, 1],
    ]);
    expect(resume.sessionId).toEqual(full.sessionId);

    const again = await p.take(() => true, 2500); // no client Finished yet: the timer resends the flight
    expect(again.records.map((r) => [r.type, r.epoch])).toEqual([
      [22, 0],
      [20, 0],
      [22, 1],
    ]);
    expect(srv.sessions).toHaveLength(1);

    p.send(Buffer.concat(resume.resumeFlight(full.master))); // throws unless the server Finished is right
    await waitFor(() => srv!.sessions.length === 2);
    expect(srv.sessions[1].resumed).toBe(true);
    expect(await resume.exchange('resumed by hand')).toBe('echo:resumed by hand');
  });

  it('an EMS session offered without extended_master_secret gets a fatal handshake_failure (RFC 7627 §5.3)', async () => {
    srv = await startEchoServer();
    const { sessionId } = await fullHandshake(srv.port);
    const first = await new HandClient(await peer(srv.port), { sessionId, extensions: [] }).hello();
    expect(first.records.map((r) => [r.type, ...r.fragment])).toEqual([[21, 2, 40]]);
    await waitFor(() => srv!.errors.length > 0);
    expect(srv.errors[0].err.message).toMatch(/extended_master_secret/);
  });
});
