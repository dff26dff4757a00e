// A real L4 balancer for the fleet: Debian's nginx with its stream module, as a child process with its own prefix
// folder (no root install, no system config). UDP for CoAP/DTLS and TCP for the HTTPS device port and the API.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const NGINX = process.env.NGINX_BIN ?? '/usr/sbin/nginx';
const STREAM_MODULE = ['/usr/lib/nginx/modules/ngx_stream_module.so', '/usr/lib64/nginx/modules/ngx_stream_module.so'].find((p) => existsSync(p));

export interface BalancedPort {
  /** what nginx listens on */
  listen: number;
  protocol: 'udp' | 'tcp';
  /** host:port of each node */
  upstreams: string[];
  /** `round-robin` (nginx's default: each new client flow to the next node) or `source` (hash of the client address and port) */
  balance?: 'round-robin' | 'source';
  /** the address nginx listens on (default 127.0.0.1) */
  host?: string;
}

/** `host:port` as nginx's `listen` and `server` and a URL take it: an IPv6 address in brackets. */
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Where this machine reaches a listener bound on `host`: a wildcard address is reached on loopback. */
export function reachable(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  return host === '::' ? '::1' : host;
}

/** The nginx command line that acts on the fleet's own nginx (its prefix and configuration), never the system's. */
export function nginxCommand(dir: string): string[] {
  return [NGINX, '-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')];
}

/** The fleet's balancer: nginx (this file) or nftables destination NAT in a network namespace (nft.ts). */
export interface Balancer {
  kind: 'nginx' | 'nft';
  dir: string;
  /** nginx's pid; null for nft (the kernel balances) */
  pid: number | null;
  running(): boolean;
  /** where devices reach the balanced ports (nft: the VIP, reached from the fleet's network namespace) */
  address: string | null;
  /** the address the balancer reaches the nodes at */
  upstreamHost: string;
  /** how to act on this balancer by hand (nginx: its command line, to which `-s reload` is added; nft: its table) */
  command: string;
  /**
   * rewrites the upstream lists (nginx: reloaded with SIGHUP): open flows stay on their node, but those to the node
   * ports in `forget` end (nft: their conntrack entries are deleted; nginx ends a reloaded worker's flows anyway), so
   * those devices' next datagrams are new flows, given a node of the new lists
   */
  reload(ports: BalancedPort[], forget?: number[]): Promise<void>;
  stop(): Promise<void>;
}

/** nginx.conf for `ports`; a UDP flow (client address and port) stays on its node until 60 s without datagrams. */
export function nginxConfig(dir: string, ports: BalancedPort[]): string {
  const blocks = ports.map((p, i) => {
    const name = `up${i}_${p.protocol}_${p.listen}`;
    const hash = p.balance === 'source' ? '    hash $remote_addr$remote_port consistent;\n' : '';
    const servers = p.upstreams.map((u) => `    server ${u} max_fails=0;\n`).join('');
    const address = hostPort(p.host ?? '127.0.0.1', p.listen);
    const listen = p.protocol === 'udp' ? `${address} udp` : address;
    // UDP: answers from the node go back to the client through the same flow; DTLS flights are several datagrams
    const udp = p.protocol === 'udp' ? '    proxy_timeout 60s;\n' : '    proxy_timeout 10m;\n    proxy_connect_timeout 2s;\n';
    return `  upstream ${name} {\n${hash}${servers}  }\n  server {\n    listen ${listen};\n    proxy_pass ${name};\n${udp}  }\n`;
  }).join('');
  return [
    STREAM_MODULE ? `load_module ${STREAM_MODULE};` : '',
    'worker_processes 1;',
    `pid ${path.join(dir, 'nginx.pid')};`,
    `error_log ${path.join(dir, 'error.log')} warn;`,
    'events { worker_connections 8192; }',
    `stream {\n${blocks}}`,
    '',
  ].join('\n');
}

async function listening(port: number, protocol: 'udp' | 'tcp', host: string): Promise<boolean> {
  if (protocol === 'udp') return true; // a UDP listener cannot be probed without a peer; nginx binds it before the TCP ones
  return new Promise((resolve) => {
    const s = net.connect(port, reachable(host));
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

/** Starts nginx in the foreground (`daemon off`) with a prefix folder of its own, and waits until its TCP ports accept. */
export async function startBalancer(dir: string, ports: BalancedPort[]): Promise<Balancer> {
  mkdirSync(dir, { recursive: true });
  const conf = path.join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, ports));
  const [bin, ...args] = nginxCommand(dir);
  const child = spawn(bin, [...args, '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}): ${stderr}${existsSync(path.join(dir, 'error.log')) ? readFileSync(path.join(dir, 'error.log'), 'utf8') : ''}`);
    const up = await Promise.all(ports.map((p) => listening(p.listen, p.protocol, p.host ?? '127.0.0.1')));
    if (up.every(Boolean) && existsSync(path.join(dir, 'nginx.pid'))) break;
    if (Date.now() > deadline) throw new Error(`nginx did not listen: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    kind: 'nginx',
    dir,
    pid: child.pid ?? null,
    running: () => child.exitCode === null && child.signalCode === null,
    address: null,
    upstreamHost: '127.0.0.1',
    command: nginxCommand(dir).join(' '),
    async reload(next) {
      writeFileSync(conf, nginxConfig(dir, next));
      child.kill('SIGHUP');
      await new Promise((r) => setTimeout(r, 200));
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGQUIT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}
