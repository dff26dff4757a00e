// `npm run fleet`: the production topology on this machine without Docker — a balancer (nft: destination NAT in a
// network namespace where devices run, the default as root; nginx stream) in front of N gateway nodes, M workers and
// the API, on the PostgreSQL of DATABASE_URL and the Redis of REDIS_URL. Ctrl-C stops it all.
//   npm run fleet -- --gateways 3 --workers 2 [--balancer nft|nginx] [--coaps-port 15684 --https-port 18443 --api-port 18080] [--host 127.0.0.1] [--dir /tmp/gridgate-fleet]
//   npm run fleet -- status | restart <node> | kill <node> | roll | stop   (from another shell; --help: every option)
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { failCli, formatUsage } from './cli.ts';
import { FLEET_OPTIONS, FLEET_SHAPE, readFleetCommand, type FleetCommand } from './fleet/command.ts';
import { askFleet, controlSocket, fleetRunning, fleetStatus, formatStatus, serveControl } from './fleet/control.ts';
import { nodeEnv } from './fleet/env.ts';
import { hostPort, reachable } from './fleet/nginx.ts';
import { nftUnavailable } from './fleet/nft.ts';
import { startFleet } from './fleet/topology.ts';

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

/** Waits up to 10 s for `pid` to exit (an exited process its parent has not reaped yet counts as gone). */
async function processGone(pid: number): Promise<boolean> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
      if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))) return true;
    } catch {
      return true;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

/** A command for the fleet running in `dir`: its answer on stdout, exit 1 when it refused or nobody answered. */
async function control(command: Extract<FleetCommand, { kind: 'control' }>): Promise<void> {
  const dir = path.resolve(command.dir);
  try {
    const answer = await askFleet(dir, command.request, (line) => process.stderr.write(`${line}\n`));
    if (!answer.ok) {
      process.stderr.write(`${answer.error}\n`);
      process.exit(1);
    }
    // the fleet answers stop before it exits: the command returns once nothing of it runs any more
    if (command.request.command === 'stop' && !(await processGone(answer.status.pid))) {
      process.stderr.write(`everything is stopped but the fleet process ${answer.status.pid} has not exited\n`);
      process.exit(1);
    }
    process.stdout.write(command.json ? `${JSON.stringify(answer.status, null, 2)}\n` : formatStatus(answer.status));
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}

async function start(command: Extract<FleetCommand, { kind: 'start' }>): Promise<void> {
  const dir = path.resolve(command.dir);
  // one fleet per folder: a second would fight the first for its ports, its nginx prefix and its control socket
  if (await fleetRunning(dir)) {
    process.stderr.write(`a fleet is already running in ${dir} (npm run fleet -- status --dir ${dir})\n`);
    process.exit(1);
  }
  // every node of a deployment shares SECRET_KEY: take the environment's, else one kept in the fleet folder
  const keyFile = path.join(dir, 'secret.key');
  const secretKey = process.env.SECRET_KEY ?? (existsSync(keyFile) ? readFileSync(keyFile, 'utf8').trim() : randomBytes(32).toString('hex'));
  const env = nodeEnv(process.env, {
    DATABASE_URL: process.env.DATABASE_URL ?? (await localDatabase()),
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    SECRET_KEY: secretKey,
    QUEUE_NAME: process.env.QUEUE_NAME ?? 'gridgate-fleet',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    DATA_DIR: path.join(dir, 'data'),
    CERTS_DIR: process.env.CERTS_DIR ?? path.resolve('certs'),
  });
  // nft keeps every device's address (and so every device's session); nginx only for fleets whose devices all use CIDs
  const unavailable = nftUnavailable();
  if (command.balancer === 'nft' && unavailable) {
    process.stderr.write(`--balancer nft: ${unavailable}\n`);
    process.exit(1);
  }
  const balancer = command.balancer === 'auto' ? (unavailable ? 'nginx' : 'nft') : command.balancer;
  if (command.balancer === 'auto' && unavailable)
    process.stderr.write(`balancer: nginx (${unavailable}); devices without a Connection ID lose their sessions when a node restarts\n`);
  const fleet = await startFleet({
    gateways: command.gateways,
    workers: command.workers,
    env,
    dir,
    balance: command.balance,
    cluster: true,
    ports: command.ports,
    host: command.host,
    balancer,
  });
  if (!existsSync(keyFile)) writeFileSync(keyFile, `${secretKey}\n`, { mode: 0o600 });
  // Prometheus file_sd targets: point a Prometheus at this file (deploy/prometheus/prometheus.yml does in Docker)
  const reach = reachable(command.host);
  writeFileSync(
    path.join(dir, 'targets.json'),
    JSON.stringify(
      fleet.nodes.map((n) => ({ targets: [hostPort(reach, n.apiPort)], labels: { node: n.name, role: n.role } })),
      null,
      2,
    ),
  );
  const status = () => fleetStatus(fleet, dir, command.host);
  // fleet.json follows every restart and kill: whoever reads it finds the pids of what runs now
  const writeStatus = () => writeFileSync(path.join(dir, 'fleet.json'), `${JSON.stringify(status(), null, 2)}\n`);
  writeStatus();
  let stopped: Promise<void> | null = null;
  // resolves once every control connection has ended: a command that was running when Ctrl-C came gets its answer
  let answered: Promise<void> = Promise.resolve();
  const stop = () => {
    stopped ??= fleet.stop().then(() => {
      answered = new Promise((resolve) => server.close(() => resolve()));
      try {
        unlinkSync(controlSocket(dir));
      } catch {
        /* already gone */
      }
    });
    return stopped;
  };
  const server = await serveControl(dir, fleet, { status, changed: writeStatus, stop, exit: () => process.exit(0) });
  process.stdout.write(formatStatus(status()));
  process.stdout.write(`pids, ports and log files: ${path.join(dir, 'fleet.json')}; Prometheus targets: ${path.join(dir, 'targets.json')}\n`);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(
      sig,
      () =>
        void stop()
          .then(() => Promise.race([answered, new Promise((r) => setTimeout(r, 5000))]))
          .then(() => process.exit(0)),
    );
  }
}

const outcome = readFleetCommand(process.argv.slice(2), process.env);
if (outcome.kind === 'help') process.stdout.write(formatUsage(FLEET_OPTIONS, FLEET_SHAPE));
else if (outcome.kind === 'error') failCli(outcome.message, FLEET_OPTIONS, FLEET_SHAPE);
else if (outcome.command.kind === 'control') await control(outcome.command);
else await start(outcome.command);
