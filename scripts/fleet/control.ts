// The running fleet's control socket: `npm run fleet -- status|restart|kill|roll|stop` from another shell asks the
// fleet process itself (a Unix socket in the fleet's folder, one JSON line each way, progress lines before the
// answer), so a restarted node is still that process's child and `stop` or Ctrl-C leaves nothing running. One
// change at a time: a restart never races a roll or a stop.
import { existsSync, unlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { Fleet, FleetNode } from './topology.ts';

export type ControlRequest = { command: 'status' | 'roll' | 'stop' } | { command: 'restart' | 'kill'; node: string; signal: 'SIGTERM' | 'SIGKILL' };

export type ControlAnswer = { ok: true; status: FleetStatus } | { ok: false; error: string };
export type ControlReply = { progress: string } | ControlAnswer;

export interface ProcessStatus {
  name: string;
  role: 'nginx' | 'nft' | FleetNode['role'];
  pid: number | null;
  running: boolean;
  /** what it listens on: a node's own ports (api: /health and /metrics), nginx's public ones */
  ports: { api?: number; https?: number; coaps?: number };
  log: string;
}

export interface FleetStatus {
  /** the fleet process: it answers the control socket and stops everything on SIGINT/SIGTERM */
  pid: number;
  dir: string;
  host: string;
  api: string;
  control: string;
  /** the balancer: nginx or nft (destination NAT in the network namespace `namespace`, where devices run) */
  balancer: 'nginx' | 'nft';
  /** nginx's own command line (`... -s reload` reloads this fleet's nginx, never the system's); nft: the command listing its table */
  nginxCommand: string;
  /** where devices reach the CoAP/DTLS and HTTPS ports */
  deviceHost: string;
  namespace?: string;
  processes: ProcessStatus[];
}

export const controlSocket = (dir: string): string => path.join(dir, 'control.sock');

const running = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;

/** Every process of `fleet` (nginx first) with its pid, ports and log file, as fleet.json and `status` give them. */
export function fleetStatus(fleet: Fleet, dir: string, host: string): FleetStatus {
  const b = fleet.balancer;
  return {
    pid: process.pid,
    dir,
    host,
    api: fleet.apiBase,
    control: controlSocket(dir),
    balancer: b.kind,
    nginxCommand: b.command,
    deviceHost: fleet.deviceHost,
    ...(fleet.namespace ? { namespace: fleet.namespace } : {}),
    processes: [
      {
        name: b.kind,
        role: b.kind,
        pid: b.pid,
        running: b.running(),
        ports: b.kind === 'nft' ? { coaps: fleet.ports.coaps, https: fleet.ports.https } : { ...fleet.ports },
        log: path.join(b.dir, b.kind === 'nft' ? 'nft-rules.nft' : 'error.log'),
      },
      ...fleet.nodes.map((n): ProcessStatus => ({
        name: n.name,
        role: n.role,
        pid: n.child.pid ?? null,
        running: running(n.child),
        ports: n.role === 'gateway' ? { api: n.apiPort, https: n.httpsPort, coaps: n.coapsPort } : { api: n.apiPort },
        log: n.logFile,
      })),
    ],
  };
}

/** One line per process, for a person: name, pid, running or not, ports, log file. */
export function formatStatus(status: FleetStatus): string {
  const rows = status.processes.map((p) => [
    p.name,
    `pid ${p.pid ?? '-'}`,
    p.running ? 'running' : 'stopped',
    Object.entries(p.ports)
      .map(([k, v]) => `${k} ${v}`)
      .join(', '),
    p.log,
  ]);
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const table = rows.map((r) => r.map((c, i) => (i < r.length - 1 ? c.padEnd(widths[i]) : c)).join('  ')).join('\n');
  const balancer =
    status.balancer === 'nft'
      ? `devices: ip netns exec ${status.namespace} <client> ${status.deviceHost} (CoAP/DTLS and HTTPS ports above); the table: ${status.nginxCommand}`
      : `nginx of this fleet: ${status.nginxCommand} -s reload`;
  return `${table}\nfleet pid ${status.pid}, API ${status.api}, control ${status.control}\n${balancer}\n`;
}

export interface ControlHandlers {
  status(): FleetStatus;
  /** called after every change of a process (fleet.json follows) */
  changed(): void;
  /** stops nginx and every node; the process exits after the answer is written */
  stop(): Promise<void>;
  exit(): void;
}

/** Listens on `<dir>/control.sock` for the commands of ControlRequest, run against `fleet` one at a time. */
export async function serveControl(dir: string, fleet: Fleet, handlers: ControlHandlers): Promise<net.Server> {
  const socketPath = controlSocket(dir);
  let queue: Promise<unknown> = Promise.resolve();
  let stopping = false;
  const node = (name: string): FleetNode => {
    const found = fleet.nodes.find((n) => n.name === name);
    if (!found) throw new Error(`no node ${name} (${fleet.nodes.map((n) => n.name).join(', ')})`);
    return found;
  };
  const run = async (request: ControlRequest, progress: (line: string) => void): Promise<void> => {
    switch (request.command) {
      case 'status':
        return;
      case 'restart': {
        const again = await fleet.restart(node(request.node), request.signal);
        progress(`${again.name} restarted: pid ${again.child.pid}`);
        return;
      }
      case 'kill':
        await fleet.kill(node(request.node), request.signal);
        return;
      case 'roll':
        // gateways() is read once: restart replaces each node in fleet.nodes, the roll goes on with the next
        for (const gateway of fleet.gateways()) {
          if (stopping) throw new Error('the fleet is stopping: roll abandoned');
          const again = await fleet.restart(gateway, 'SIGTERM');
          progress(`${again.name} restarted: pid ${again.child.pid}`);
        }
        return;
      case 'stop':
        stopping = true;
        await handlers.stop();
        return;
    }
  };
  const server = net.createServer((socket) => {
    let buffered = '';
    let asked = false;
    socket.setEncoding('utf8');
    const send = (reply: ControlReply) => {
      if (!socket.destroyed) socket.write(`${JSON.stringify(reply)}\n`);
    };
    socket.on('error', () => {
      /* the client went; what it asked for still runs to its end */
    });
    socket.on('data', (chunk: string) => {
      // one request per connection; the socket keeps reading after it, so the client's end is seen and the
      // connection closes (a stopping fleet waits for its open connections to have their answers)
      if (asked) return;
      buffered += chunk;
      const end = buffered.indexOf('\n');
      if (end < 0) return;
      const line = buffered.slice(0, end);
      buffered = '';
      asked = true;
      let request: ControlRequest;
      try {
        request = JSON.parse(line) as ControlRequest;
      } catch {
        send({ ok: false, error: 'not a JSON line' });
        socket.end();
        return;
      }
      if (stopping && request.command !== 'status') {
        send({ ok: false, error: 'the fleet is stopping' });
        socket.end();
        return;
      }
      if (request.command === 'stop') stopping = true;
      // status answers at once, even during a roll; changes wait their turn
      const step = request.command === 'status' ? Promise.resolve() : queue;
      const done = step
        .then(() => run(request, (p) => send({ progress: p })))
        .then(
          () => {
            if (request.command !== 'status') handlers.changed();
            send({ ok: true, status: handlers.status() });
          },
          (err: unknown) => send({ ok: false, error: err instanceof Error ? err.message : String(err) }),
        )
        .finally(() => {
          if (request.command === 'stop') socket.end(() => handlers.exit());
          else socket.end();
        });
      if (request.command !== 'status') queue = done;
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** True when a fleet answers on `dir`'s control socket; a socket file nobody answers on (a fleet killed) is removed. */
export async function fleetRunning(dir: string): Promise<boolean> {
  const socketPath = controlSocket(dir);
  if (!existsSync(socketPath)) return false;
  const answered = await new Promise<boolean>((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
  if (!answered) unlinkSync(socketPath);
  return answered;
}

/** Sends `request` to the fleet running in `dir` and waits for its answer; `onProgress` gets the lines before it. */
export async function askFleet(dir: string, request: ControlRequest, onProgress: (line: string) => void = () => {}): Promise<ControlAnswer> {
  const socketPath = controlSocket(dir);
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    let buffered = '';
    let answer: ControlAnswer | null = null;
    socket.setEncoding('utf8');
    socket.once('connect', () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
        const reply = JSON.parse(buffered.slice(0, end)) as ControlReply;
        buffered = buffered.slice(end + 1);
        if ('progress' in reply) onProgress(reply.progress);
        else answer = reply;
      }
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      reject(err.code === 'ENOENT' || err.code === 'ECONNREFUSED' ? new Error(`no fleet is running in ${dir} (nothing answers on ${socketPath})`) : err);
    });
    socket.once('close', () => {
      if (answer) resolve(answer);
      else reject(new Error(`the fleet in ${dir} closed the connection before it answered (it stopped meanwhile?)`));
    });
  });
}
