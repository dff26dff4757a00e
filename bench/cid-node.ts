// One gateway node of a CID-routed cluster for bench/cid-routing.ts: our DTLS server (one PSK for every identity)
// answering each application record with its content, as one node of the cluster (src/dtls/cluster/) on the real
// Redis. Tells its parent { ready: { port, nodeId } } once it listens and knows the other nodes; BENCH_BATCH_BYTES is
// its batchBytes (0: one message per inter-node datagram, as before coalescing); { sent } answers its datagram counts.
import { createSecretKey } from 'node:crypto';
import { createLogger } from '../src/app/logger.ts';
import { Redis } from 'ioredis';
import { DtlsClusterNode } from '../src/dtls/cluster/node.ts';
import { NodeRegistry } from '../src/gateway/cluster-registry.ts';
import { createDtlsServer } from '../src/dtls/server.ts';
import type { DtlsSession } from '../src/dtls/server.ts';

const psk = Buffer.from(process.env.BENCH_PSK!, 'hex');
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const dtls = createDtlsServer({
  socket: 0,
  host: '127.0.0.1',
  lookupPsk: async () => psk,
  handshakeRatePerAddress: 100_000,
  handshakeBurstPerAddress: 100_000,
});
dtls.on('session', (s: DtlsSession) => s.on('data', (d: Buffer) => s.send(d)));
await new Promise((r) => dtls.once('listening', r));
const log = createLogger('warn');
const cluster = await DtlsClusterNode.start(
  {
    log,
    directory: (self) => new NodeRegistry(redis, log, process.env.BENCH_DEPLOYMENT!, self, 10_000),
    key: createSecretKey(Buffer.from(process.env.BENCH_CLUSTER_KEY!, 'hex')),
    address: '127.0.0.1',
    port: 0,
    ...(process.env.BENCH_BATCH_BYTES ? { batchBytes: Number(process.env.BENCH_BATCH_BYTES) } : {}),
  },
  dtls,
);
process.send!({ ready: { port: dtls.address().port, nodeId: cluster.nodeId } });
process.on('message', async (m: { peers?: number; sent?: true; stop?: true }) => {
  if (m.sent) process.send!({ sent: cluster.sent });
  if (m.peers) {
    // until this node's directory holds them all (a lookup reads Redis again)
    while (cluster.registry.nodes.size < m.peers) await new Promise((r) => setTimeout(r, 100)).then(() => cluster.registry.lookup(-1));
    process.send!({ known: cluster.registry.nodes.size });
  }
  if (m.stop) {
    await cluster.close();
    await dtls.close();
    await redis.quit();
    process.exit(0);
  }
});
