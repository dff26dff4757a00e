/** Per-source-address limits: associations per address and a handshake-rate token bucket, seen by hand-driven peers. */
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/settings.ts';
import { AddressLimits, DTLS_DEFAULTS } from '../../src/dtls/limits.ts';
import { createDtlsServer } from '../../src/dtls/server.ts';
import { perTest, serverHelloAfterCookie, startEchoServer, waitFor } from './helpers.ts';

const t = perTest();

/** Does a cookie exchange from `address` and sends ClientHello 2: true when a ServerHello comes back. */
const getsServerHello = (port: number, address = '127.0.0.1') => serverHelloAfterCookie(t.peers, port, address, 400);

describe('DTLS per-address limits', () => {
  it('maxSessionsPerAddress: the third association from 127.0.0.1 is refused, 127.0.0.2 still gets one', async () => {
    t.srv = await startEchoServer({ maxSessionsPerAddress: 2 });
    expect(await getsServerHello(t.srv.port)).toBe(true);
    expect(await getsServerHello(t.srv.port)).toBe(true);
    expect(t.srv.server.sessionsFrom('127.0.0.1')).toBe(2);
    expect(await getsServerHello(t.srv.port)).toBe(false);
    expect(await getsServerHello(t.srv.port, '127.0.0.2')).toBe(true);
    expect(t.srv.server.handshakeCount).toBe(3);
  });

  it('an association that ends frees its place for the address', async () => {
    t.srv = await startEchoServer({ maxSessionsPerAddress: 1, handshakeTimeoutMs: 300 });
    expect(await getsServerHello(t.srv.port)).toBe(true);
    expect(await getsServerHello(t.srv.port)).toBe(false);
    await waitFor(() => t.srv!.server.sessionsFrom('127.0.0.1') === 0); // the handshake timed out
    expect(await getsServerHello(t.srv.port)).toBe(true);
  });

  it('handshake rate: after a burst of 3 the address must wait for tokens; another address is not affected', async () => {
    t.srv = await startEchoServer({ handshakeBurstPerAddress: 3, handshakeRatePerAddress: 2 });
    for (let i = 0; i < 3; i++) expect(await getsServerHello(t.srv.port)).toBe(true);
    expect(await getsServerHello(t.srv.port)).toBe(false);
    expect(await getsServerHello(t.srv.port, '127.0.0.3')).toBe(true);
    await new Promise((r) => setTimeout(r, 600)); // 2 per second: one token back after 500 ms
    expect(await getsServerHello(t.srv.port)).toBe(true);
  });

  it("a server given no limits takes the configuration's defaults", async () => {
    t.srv = await startEchoServer();
    expect(t.srv.server.limits).toEqual(loadConfig({ SECRET_KEY: '00'.repeat(32) }).dtls);
  });

  it('a server that binds its own socket asks for DTLS_RECEIVE_BUFFER_BYTES of receive buffer (as far as rmem_max allows)', async () => {
    const server = createDtlsServer({ socket: 0, host: '127.0.0.1', lookupPsk: async () => null });
    try {
      await once(server, 'listening');
      const rmemMax = Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8'));
      // Linux reports twice what was set (its bookkeeping overhead)
      expect(server.socket.getRecvBufferSize() / 2).toBeGreaterThanOrEqual(Math.min(DTLS_DEFAULTS.receiveBufferBytes, rmemMax));
    } finally {
      await server.close();
    }
  });

  it('defaults are in place and invalid limits are refused at construction', () => {
    expect(() => createDtlsServer({ socket: 0, lookupPsk: async () => null, handshakeRatePerAddress: -1 })).toThrow(/handshakeRatePerAddress/);
    expect(() => createDtlsServer({ socket: 0, lookupPsk: async () => null, maxSessionsPerAddress: Number.NaN })).toThrow(/maxSessionsPerAddress/);
  });
});

describe('AddressLimits token bucket', () => {
  it('spends one token per handshake and refills at the configured rate, capped at the burst', () => {
    const l = new AddressLimits({ maxSessionsPerAddress: 100, handshakeRatePerAddress: 1, handshakeBurstPerAddress: 2 });
    expect([l.admit('a', 0), l.admit('a', 0), l.admit('a', 0)]).toEqual([true, true, false]);
    expect(l.admit('a', 999)).toBe(false);
    expect(l.admit('a', 1000)).toBe(true);
    expect(l.admit('a', 100_000)).toBe(true);
    expect(l.admit('a', 100_000)).toBe(true);
    expect(l.admit('a', 100_000)).toBe(false);
    expect(l.admit('b', 100_000)).toBe(true);
  });

  it('counts associations per address', () => {
    const l = new AddressLimits({ maxSessionsPerAddress: 1, handshakeRatePerAddress: 100, handshakeBurstPerAddress: 100 });
    l.added('a');
    expect(l.admit('a')).toBe(false);
    expect(l.admit('b')).toBe(true);
    l.removed('a');
    expect(l.sessions('a')).toBe(0);
    expect(l.admit('a')).toBe(true);
  });
});
