// A DTLS server alone (no CoAP, no pipeline), as a child process of bench/dtls.ts: every PSK identity maps to one key
// (what the service's Redis-cached lookup returns on a hit) and every session echoes what it receives. On IPC
// message 'memory' it collects garbage and answers the heap, external and RSS figures, to measure the memory an idle
// established session holds. With BENCH_CERT_DIR (server.pem, server.key, ca.pem) it also offers the ECDHE-ECDSA
// suites and requires client certificates chained to ca.pem. With BENCH_KEEP=on it keeps sessions and the resumption
// cache in Redis (REDIS_URL) as the gateway does by default (DTLS_KEEP_SESSIONS=on). Run with --expose-gc.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createDtlsServer } from '../src/dtls/server.ts';
import { DtlsStateStore } from '../src/gateway/dtls-session-store.ts';

const key = Buffer.from(process.env.BENCH_PSK ?? '', 'hex');
const certDir = process.env.BENCH_CERT_DIR;
const anchors = certDir ? [new X509Certificate(readFileSync(path.join(certDir, 'ca.pem')))] : [];
const kept =
  process.env.BENCH_KEEP === 'on'
    ? new DtlsStateStore(new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'), {
        prefix: `bench-dtls-${randomBytes(4).toString('hex')}:`,
        secretKey: randomBytes(32),
        idleTimeoutMs: 600_000,
      })
    : undefined;
const server = createDtlsServer({
  ...(kept ? { keeper: kept, sharedCache: kept } : {}),
  ...(certDir
    ? {
        certificate: {
          key: readFileSync(path.join(certDir, 'server.key')),
          chain: [readFileSync(path.join(certDir, 'server.pem')), readFileSync(path.join(certDir, 'ca.pem'))],
          trustAnchors: () => anchors,
        },
      }
    : {}),
  socket: Number(process.env.BENCH_PORT ?? 0),
  host: '127.0.0.1',
  lookupPsk: async () => key,
  maxSessions: 100_000,
  maxHandshakes: 10_000,
  // every bench client comes from 127.0.0.1: the per-address limits must not be what is measured
  maxSessionsPerAddress: 100_000,
  handshakeRatePerAddress: 1_000_000,
  handshakeBurstPerAddress: 1_000_000,
});
let sessions = 0;
server.on('session', (s) => {
  sessions++;
  s.on('data', (d: Buffer) => s.send(d));
  s.on('close', () => {
    sessions--;
  });
});
server.on('handshakeError', () => undefined);
server.on('listening', () => process.send?.({ ready: server.address().port }));
process.on('message', (m) => {
  if (m !== 'memory') return;
  for (let i = 0; i < 3; i++) (globalThis as { gc?: () => void }).gc?.();
  const u = process.memoryUsage();
  process.send?.({ sessions, heapUsed: u.heapUsed, external: u.external, arrayBuffers: u.arrayBuffers, rss: u.rss });
});
process.on('SIGTERM', () => {
  void server.close().then(() => process.exit(0));
});
