// A real nginx `stream` balancer in front of service processes (UDP for CoAP/DTLS, TCP for HTTPS), as a fleet runs
// behind one: started with its own prefix directory, stopped with the test.
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';

export interface BalancedPort {
  protocol: 'udp' | 'tcp';
  /** the backends' ports on 127.0.0.1 */
  upstreams: number[];
  /** nginx's balancing directive in the upstream block; default round robin (none). E.g. 'hash $remote_addr$remote_port'. */
  balance?: string;
}

export interface Nginx {
  /** the port nginx listens on for each BalancedPort, in order */
  ports: number[];
  /** nginx's error log so far (debugging a test) */
  errorLog(): string;
  stop(): Promise<void>;
}

/** A UDP port nothing is bound to right now (the OS picks it). */
export async function freeUdpPort(): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise<void>((r) => s.close(r));
  return port;
}

/**
 * Starts nginx (one worker, `daemon off`) balancing each of `balanced` over its upstreams. UDP sessions last
 * `udpTimeoutS` without a datagram and carry any number of answers (DTLS sends several datagrams per flight).
 */
export async function startNginx(balanced: BalancedPort[], udpTimeoutS = 60): Promise<Nginx> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-nginx-'));
  const ports: number[] = [];
  const servers: string[] = [];
  for (const [i, b] of balanced.entries()) {
    const port = b.protocol === 'udp' ? await freeUdpPort() : await freePort();
    ports.push(port);
    servers.push(`
  upstream backend${i} {
    ${b.balance ? `${b.balance};` : ''}
    ${b.upstreams.map((u) => `server 127.0.0.1:${u};`).join('\n    ')}
  }
  server {
    listen 127.0.0.1:${port}${b.protocol === 'udp' ? ' udp' : ''};
    proxy_pass backend${i};
    ${b.protocol === 'udp' ? `proxy_timeout ${udpTimeoutS}s;` : ''}
  }`);
  }
  const errorLog = path.join(dir, 'error.log');
  writeFileSync(path.join(dir, 'nginx.conf'), `
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
daemon off;
worker_processes 1;
pid ${path.join(dir, 'nginx.pid')};
error_log ${errorLog} info;
events { worker_connections 1024; }
stream {${servers.join('\n')}
}
`);
  const child: ChildProcess = spawn('nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const readLog = () => {
    try {
      return readFileSync(errorLog, 'utf8');
    } catch {
      return '';
    }
  };
  // nginx writes "start worker process" once it listens
  for (let i = 0; i < 100 && !/start worker process/.test(readLog()); i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}: ${stderr}${readLog()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!/start worker process/.test(readLog())) throw new Error(`nginx did not start: ${stderr}${readLog()}`);
  return {
    ports,
    errorLog: readLog,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
