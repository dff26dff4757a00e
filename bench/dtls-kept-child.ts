// Child of bench/dtls-kept.ts (run with --expose-gc): N idle DTLS sessions kept in Redis, carried on by one server
// (load after a crash: each from its handshake-time state), handed over with suspend() (save), and carried on by a
// second server (load after a hand-over). Prints one JSON line of figures.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createDtlsServer } from '../src/dtls/server.ts';
import { DtlsStateStore } from '../src/gateway/dtls-session-store.ts';

const n = Number(process.env.BENCH_KEPT_SESSIONS ?? 100_000);
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const prefix = `bench-kept-${randomBytes(4).toString('hex')}:`;
const store = new DtlsStateStore(redis, { prefix, secretKey: randomBytes(32), idleTimeoutMs: 600_000 });
const gc = () => {
  for (let i = 0; i < 3; i++) (globalThis as { gc?: () => void }).gc?.();
};
const heap = () => {
  const u = process.memoryUsage();
  return u.heapUsed + u.external;
};
const peer = (i: number) => ({ address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, port: 5684 });

function server() {
  return createDtlsServer({
    socket: 0,
    host: '127.0.0.1',
    lookupPsk: async () => null,
    keeper: store,
    sharedCache: store,
    maxSessions: n + 1000,
    maxHandshakes: 10_000,
  });
}

/** Wall and CPU ms of `f` (this machine is shared: CPU says what the work costs when the wall clock waits for others). */
async function timed(f: () => Promise<unknown>): Promise<{ ms: number; cpuMs: number }> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await f();
  const used = process.cpuUsage(cpu);
  return { ms: performance.now() - started, cpuMs: (used.user + used.system) / 1000 };
}

/** Carries on every session from the store, 1,000 at a time. */
async function loadAll(s: ReturnType<typeof server>): Promise<void> {
  for (let i = 0; i < n; i += 1000) {
    const got = await Promise.all(Array.from({ length: Math.min(1000, n - i) }, (_, j) => s.takeOverSession(peer(i + j))));
    if (got.some((x) => x === null)) throw new Error('a kept session was not found');
  }
}

// the state every session leaves at its handshake (CCM_8, PSK): written as the server writes it, not measured
const now = Date.now();
for (let i = 0; i < n; i++) {
  const p = peer(i);
  store.established(
    `a${p.address}:${p.port}`,
    {
      suiteId: 0xc0a8,
      extendedMasterSecret: true,
      keyBlock: randomBytes(40),
      sessionId: randomBytes(32),
      pskIdentity: `device-${i}`,
      peerCertificates: [],
    },
    { writeSeq: 1, replay: [1, 3, 0], remoteAddress: p.address, remotePort: p.port, lastActive: now, attachment: Buffer.from('0001dev') },
  );
  if (i % 10_000 === 0) await redis.ping();
}
await redis.ping();

const a = server();
gc();
const before = heap();
const loadCrash = await timed(() => loadAll(a));
gc();
const perSession = (heap() - before) / a.sessionCount;
let saved = 0;
const save = await timed(async () => {
  saved = await a.suspend();
});
const b = server();
const load = await timed(() => loadAll(b));
await b.suspend();
let cursor = '0';
do {
  const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 10_000);
  cursor = next;
  if (keys.length > 0) await redis.unlink(...keys);
} while (cursor !== '0');
redis.disconnect();
process.stdout.write(`${JSON.stringify({ n, saved, save, load, loadCrash, perSession })}\n`);
