// `npm run fleet`: the production topology on this machine without Docker — nginx (stream) in front of N gateway
// nodes, M workers and the API, on the PostgreSQL of DATABASE_URL and the Redis of REDIS_URL. Ctrl-C stops it all.
//   npm run fleet -- --gateways 3 --workers 2 [--coaps-port 5684 --https-port 8443 --api-port 8080] [--dir /tmp/gridgate-fleet]  (--help: every option)
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { parseCli } from './cli.ts';
import { startFleet } from './fleet/topology.ts';

const { values } = parseCli({
  gateways: { type: 'string', default: '3', number: true, placeholder: 'n', description: 'gateway nodes behind nginx (the device ports; a CID-routed cluster)' },
  workers: { type: 'string', default: '2', number: true, placeholder: 'n', description: 'worker processes (the device pipeline)' },
  'coaps-port': { type: 'string', default: '5684', number: true, placeholder: 'port', description: "nginx's CoAP/DTLS port for devices" },
  'https-port': { type: 'string', default: '8443', number: true, placeholder: 'port', description: "nginx's HTTPS port for devices (TLS-PSK and certificates)" },
  'api-port': { type: 'string', default: '8080', number: true, placeholder: 'port', description: "the API node's REST port" },
  dir: { type: 'string', default: '/tmp/gridgate-fleet', placeholder: 'path', description: "the fleet's folder: logs, nginx configuration, data, the shared SECRET_KEY, Prometheus targets" },
  balance: { type: 'string', default: 'round-robin', choices: ['round-robin', 'source'], description: "how nginx picks a gateway node for a new device connection" },
}, {
  usage: `usage: npm run fleet -- [options]
The production topology on this machine without Docker: nginx (stream) in front of the gateway nodes, the workers and
the API, on the PostgreSQL of DATABASE_URL (else database gridgate_fleet on 127.0.0.1:5432, created when missing) and
the Redis of REDIS_URL (REDIS_CLUSTER_NODES for a cluster). Prints the addresses as JSON; Ctrl-C stops it all.`,
});
const dir = path.resolve(values.dir);
// every node of a deployment shares SECRET_KEY: take the environment's, else one kept in the fleet folder
const keyFile = path.join(dir, 'secret.key');
const secretKey = process.env.SECRET_KEY ?? (existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : randomBytes(32).toString('hex'));
/** Without DATABASE_URL: database gridgate_fleet on the local PostgreSQL, created when missing (kept across runs). */
async function localDatabase(): Promise<string> {
  const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  try {
    const { rowCount } = await admin.query("SELECT 1 FROM pg_database WHERE datname = 'gridgate_fleet'");
    if (rowCount === 0) await admin.query('CREATE DATABASE gridgate_fleet');
  } finally {
    await admin.end();
  }
  return 'postgres://postgres@127.0.0.1:5432/gridgate_fleet';
}
const env: Record<string, string> = {
  DATABASE_URL: process.env.DATABASE_URL ?? await localDatabase(),
  REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  ...(process.env.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES } : {}),
  SECRET_KEY: secretKey, QUEUE_NAME: process.env.QUEUE_NAME ?? 'gridgate-fleet', LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
  DATA_DIR: path.join(dir, 'data'), CERTS_DIR: process.env.CERTS_DIR ?? path.resolve('certs'),
};
const fleet = await startFleet({
  gateways: Number(values.gateways), workers: Number(values.workers), env, dir, balance: values.balance === 'source' ? 'source' : 'round-robin', cluster: true,
  ports: { api: Number(values['api-port']), https: Number(values['https-port']), coaps: Number(values['coaps-port']) },
});
if (!existsSync(keyFile)) writeFileSync(keyFile, `${secretKey}\n`, { mode: 0o600 });
// Prometheus file_sd targets: point a Prometheus at this file (deploy/prometheus/prometheus.yml does in Docker)
writeFileSync(path.join(dir, 'targets.json'), JSON.stringify(fleet.nodes.map((n) => ({ targets: [`127.0.0.1:${n.apiPort}`], labels: { node: n.name, role: n.role } })), null, 2));
process.stdout.write(`${JSON.stringify({
  api: fleet.apiBase, httpsDevicePort: fleet.ports.https, coapsPort: fleet.ports.coaps, logs: dir, prometheusTargets: path.join(dir, 'targets.json'),
  nodes: fleet.nodes.map((n) => ({ name: n.name, pid: n.child.pid, metrics: `http://127.0.0.1:${n.apiPort}/metrics`, ...(n.role === 'gateway' ? { https: n.httpsPort, coaps: n.coapsPort } : {}) })),
}, null, 2)}\n`);
let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    void fleet.stop().then(() => process.exit(0));
  });
}
