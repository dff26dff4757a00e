// The command line of `npm run fleet`: with no command it starts a fleet; with one (status, restart <node>,
// kill <node>, roll, stop) it asks the fleet already running in --dir, through its control socket (control.ts).
import { readCli, type CliOutcome, type CliShape } from '../cli.ts';
import type { ControlRequest } from './control.ts';

/** Defaults beside `npm start`'s (8080, 8443, 5684), so a fleet and the one-process service run side by side. */
export const FLEET_DEFAULT_PORTS = { api: 18080, https: 18443, coaps: 15684 } as const;

export const FLEET_OPTIONS = {
  gateways: {
    type: 'string',
    default: '3',
    number: true,
    placeholder: 'n',
    description: 'gateway nodes behind nginx (the device ports; a CID-routed cluster)',
  },
  workers: { type: 'string', default: '2', number: true, placeholder: 'n', description: 'worker processes (the device pipeline)' },
  'coaps-port': {
    type: 'string',
    default: String(FLEET_DEFAULT_PORTS.coaps),
    number: true,
    placeholder: 'port',
    description: "nginx's CoAP/DTLS port for devices",
  },
  'https-port': {
    type: 'string',
    default: String(FLEET_DEFAULT_PORTS.https),
    number: true,
    placeholder: 'port',
    description: "nginx's HTTPS port for devices (TLS-PSK and certificates)",
  },
  'api-port': {
    type: 'string',
    default: String(FLEET_DEFAULT_PORTS.api),
    number: true,
    placeholder: 'port',
    description: "nginx's port for the API node's REST API",
  },
  host: { type: 'string', placeholder: 'address', description: "the address nginx listens on and the nodes' API_HOST (default API_HOST, else 127.0.0.1)" },
  dir: {
    type: 'string',
    default: '/tmp/gridgate-fleet',
    placeholder: 'path',
    description: "the fleet's folder: logs, nginx configuration, data, the shared SECRET_KEY, Prometheus targets, fleet.json, control.sock",
  },
  balancer: {
    type: 'string',
    default: 'auto',
    choices: ['auto', 'nft', 'nginx'],
    description:
      'nft: destination NAT in a network namespace of the fleet (devices run in it and keep their addresses: every device keeps its session; needs root); nginx: for fleets whose devices all use CIDs; auto: nft when root with ip, nft and conntrack, else nginx',
  },
  balance: {
    type: 'string',
    default: 'round-robin',
    choices: ['round-robin', 'source'],
    description: 'how nginx picks a gateway node for a new device connection',
  },
  json: { type: 'boolean', description: "status: print fleet.json's JSON (with running: true or false) rather than a table" },
  signal: {
    type: 'string',
    default: 'SIGTERM',
    choices: ['SIGTERM', 'SIGKILL'],
    description: 'restart and kill: how the node is stopped (SIGTERM: it drains and keeps its DTLS sessions)',
  },
} as const;

export const FLEET_SHAPE: CliShape = {
  positionals: true,
  usage: `usage: npm run fleet -- [options]                  start a fleet (Ctrl-C or \`stop\` stops it all)
       npm run fleet -- status|roll|stop [--dir path] [--json]
       npm run fleet -- restart|kill <node> [--dir path] [--signal SIGTERM|SIGKILL]
The production topology on this machine without Docker: a balancer (nft: destination NAT in a network namespace where
devices run; nginx stream) in front of the gateway nodes, the workers and the API, on the PostgreSQL of DATABASE_URL (else database gridgate_fleet on 127.0.0.1:5432, created when missing) and
the Redis of REDIS_URL (REDIS_CLUSTER_NODES for a cluster). Every other setting of docs/configuration.md set in this
environment reaches every node (QUEUE_SHARDS, SHUTDOWN_GRACE_MS, DTLS_*, ...). At start it prints every process's pid,
ports and log file and writes them to <dir>/fleet.json.
Commands, answered by the fleet running in --dir through <dir>/control.sock:
  status           every process: pid, running or not, ports, log file
  restart <node>   stop the node (a gateway out of the balancer meanwhile), start it again, wait for /health
  kill <node>      stop the node and leave it stopped (restart starts it again)
  roll             restart every gateway node, one after another
  stop             stop nginx and every node, then the fleet itself`,
};

export type FleetCommand =
  | {
      kind: 'start';
      gateways: number;
      workers: number;
      ports: { api: number; https: number; coaps: number };
      host: string;
      dir: string;
      balance: 'round-robin' | 'source';
      balancer: 'auto' | 'nft' | 'nginx';
    }
  | { kind: 'control'; dir: string; request: ControlRequest; json: boolean };

/** What `args` ask of `npm run fleet` (`env` gives API_HOST for --host's default), or the usage, or one line naming a mistake. */
export function readFleetCommand(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): { kind: 'ok'; command: FleetCommand } | Exclude<CliOutcome<typeof FLEET_OPTIONS>, { kind: 'ok' }> {
  const outcome = readCli(args, FLEET_OPTIONS, FLEET_SHAPE);
  if (outcome.kind !== 'ok') return outcome;
  const { values, positionals } = outcome.parsed;
  const [name, node, ...rest] = positionals;
  const dir = values.dir;
  const signal = values.signal === 'SIGKILL' ? 'SIGKILL' : 'SIGTERM';
  const extra = (what: string | undefined) => ({ kind: 'error' as const, message: `unexpected argument ${JSON.stringify(what)}` });
  switch (name) {
    case undefined:
      return {
        kind: 'ok',
        command: {
          kind: 'start',
          gateways: Number(values.gateways),
          workers: Number(values.workers),
          dir,
          balance: values.balance === 'source' ? 'source' : 'round-robin',
          balancer: values.balancer === 'nft' || values.balancer === 'nginx' ? values.balancer : 'auto',
          ports: { api: Number(values['api-port']), https: Number(values['https-port']), coaps: Number(values['coaps-port']) },
          host: values.host ?? (env.API_HOST || '127.0.0.1'),
        },
      };
    case 'status':
    case 'roll':
    case 'stop':
      if (node !== undefined) return extra(node);
      return { kind: 'ok', command: { kind: 'control', dir, request: { command: name }, json: values.json } };
    case 'restart':
    case 'kill':
      if (node === undefined) return { kind: 'error', message: `${name} needs a node (e.g. gateway-1; status lists them)` };
      if (rest.length > 0) return extra(rest[0]);
      return { kind: 'ok', command: { kind: 'control', dir, request: { command: name, node, signal }, json: values.json } };
    default:
      return { kind: 'error', message: `unknown command ${JSON.stringify(name)} (status, restart <node>, kill <node>, roll, stop)` };
  }
}
