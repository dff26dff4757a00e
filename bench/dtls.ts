// DTLS and CoAP rows of `npm run bench`. The load comes from bench/dtls-load.c (OpenSSL, native, compiled here with
// gcc) so the client's CPU stays small next to the server's:
//   - full PSK handshakes/s against the DTLS server alone (bench/dtls-server.ts), 20 s by default
//   - full ECDHE-ECDSA handshakes/s with a client certificate (P-256 chain made with the openssl CLI)
//   - memory per idle established session (heap + external after GC, and RSS) of the DTLS server alone, without and
//     with the session store (bench/dtls-kept.ts measures the store itself)
//   - the same two handshake loads against libcoap's coap-server-openssl (C, OpenSSL), PSK (-k) and certificate
//     (-c -j -C: client certificate verified), each beside ours as a ratio
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PORT_SHIFT, root } from './harness.ts';

export interface BenchRow {
  name: string;
  value: number;
  unit: string;
  p50Ms?: number;
  p99Ms?: number;
  errors?: number;
  detail?: string;
  target: string;
}

const LOAD = path.join(root, 'bench/.build/dtls-load');

/** Compiles the load generator when its source is newer than the binary. */
export function buildLoadGenerator(): string {
  const src = path.join(root, 'bench/dtls-load.c');
  if (!existsSync(LOAD) || statSync(LOAD).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(path.dirname(LOAD), { recursive: true });
    execFileSync('gcc', ['-O2', '-o', LOAD, src, '-lssl', '-lcrypto', '-lm'], { stdio: 'inherit' });
  }
  return LOAD;
}

interface LoadResult {
  ok: number;
  errors: number;
  cpuMs: number;
  hist: [number, number][];
  slow?: [number, number][];
  startMs?: number;
  suite?: string;
  sessions?: number;
}

/** Runs `procs` load generators in parallel and merges their counts and latency histograms. */
export async function runLoad(
  procs: number,
  args: (i: number) => string[],
): Promise<{ ok: number; errors: number; p50Ms: number; p99Ms: number; clientCpuMs: number; suite: string; sessions: number }> {
  // the coap mode's processes start their load together once all their sessions are up (DTLS_LOAD_BARRIER)
  const children: ChildProcess[] = [];
  let ready = 0;
  // a process that ended before it was ready (it failed) lets the others go too
  const isReady = () => {
    if (++ready === procs) for (const c of children) c.stdin?.end('go\n');
  };
  const results = await Promise.all(
    Array.from(
      { length: procs },
      (_, i) =>
        new Promise<LoadResult>((resolve, reject) => {
          const child = spawn(LOAD, args(i), {
            stdio: ['pipe', 'pipe', 'inherit'],
            env: { ...process.env, DTLS_LOAD_BARRIER: '1', DTLS_LOAD_SLOW_MS: process.env.BENCH_TIMELINE_SLOW_MS ?? '100' },
          });
          children.push(child);
          child.stdin.on('error', () => undefined);
          let out = '';
          child.stdout.on('data', (d: Buffer) => {
            const before = out;
            out += d.toString();
            if (!before.includes('ready\n') && out.includes('ready\n')) isReady();
          });
          // 'close', not 'exit': the last stdout chunk may still be unread when the process has exited
          child.on('close', (code) => {
            if (!out.includes('ready\n')) isReady();
            const line = out.trim().split('\n').pop() ?? '';
            if (code !== 0 || !line.startsWith('{')) reject(new Error(`dtls-load exited ${code}: ${out}`));
            else resolve(JSON.parse(line) as LoadResult);
          });
        }),
    ),
  );
  const hist = new Map<number, number>();
  for (const r of results) for (const [b, n] of r.hist) hist.set(b, (hist.get(b) ?? 0) + n);
  const ok = results.reduce((a, r) => a + r.ok, 0);
  if (process.env.BENCH_TIMELINE) {
    // BENCH_TIMELINE=1: when the answers slower than 100 ms (BENCH_TIMELINE_SLOW_MS) came back (100 ms slots since the load started)
    const slow = new Map<number, number>();
    for (const r of results) for (const [slot, n] of r.slow ?? []) slow.set(slot, (slow.get(slot) ?? 0) + n);
    console.log(
      `answers > ${process.env.BENCH_TIMELINE_SLOW_MS ?? 100} ms by 100 ms slot since ${new Date(results[0]?.startMs ?? 0).toISOString()}: ${
        [...slow]
          .sort((x, y) => x[0] - y[0])
          .map(([slot, n]) => `${(slot / 10).toFixed(1)}s:${n}`)
          .join(' ') || 'none'
      }`,
    );
  }
  const quantile = (q: number) => {
    let seen = 0;
    for (const [b, n] of [...hist].sort((x, y) => x[0] - y[0])) {
      seen += n;
      if (seen >= q * ok) return 1.02 ** (b + 0.5) / 1000;
    }
    return 0;
  };
  return {
    ok,
    errors: results.reduce((a, r) => a + r.errors, 0),
    clientCpuMs: results.reduce((a, r) => a + r.cpuMs, 0),
    p50Ms: Number(quantile(0.5).toFixed(2)),
    p99Ms: Number(quantile(0.99).toFixed(2)),
    suite: results.find((r) => r.suite)?.suite ?? '',
    sessions: results.reduce((a, r) => a + (r.sessions ?? 0), 0),
  };
}

interface MemoryFigures {
  sessions: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  rss: number;
}

/** A throwaway P-256 CA, a server certificate and a client certificate (clientAuth), made with the openssl CLI. */
export function makeCertificates(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-bench-certs-'));
  const sh = (cmd: string) => execFileSync('bash', ['-c', cmd], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  sh(
    'openssl ecparam -name prime256v1 -genkey -noout -out ca.key && openssl req -x509 -new -key ca.key -subj /CN=bench-ca -days 2 -out ca.pem ' +
      '-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign',
  );
  for (const [name, eku] of [
    ['server', 'serverAuth'],
    ['client', 'clientAuth'],
  ]) {
    sh(
      `openssl ecparam -name prime256v1 -genkey -noout -out ${name}.key && openssl req -new -key ${name}.key -subj /CN=bench-${name} -out ${name}.csr` +
        ` && printf 'extendedKeyUsage=${eku}\\nsubjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ${name}.ext` +
        ` && openssl x509 -req -in ${name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ${name}.ext -out ${name}.pem`,
    );
  }
  return dir;
}

/** bench/dtls-server.ts; `keep`: with sessions and the resumption cache in Redis, as the gateway runs it by default. */
export function startDtlsServer(psk: Buffer, certDir?: string, keep = false): Promise<{ child: ChildProcess; port: number; memory(): Promise<MemoryFigures> }> {
  const child = fork(path.join(root, 'bench/dtls-server.ts'), [], {
    execArgv: ['--expose-gc', '--disable-warning=ExperimentalWarning'],
    env: { ...process.env, BENCH_PSK: psk.toString('hex'), BENCH_PORT: '0', BENCH_KEEP: keep ? 'on' : 'off', ...(certDir ? { BENCH_CERT_DIR: certDir } : {}) },
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bench DTLS server exited ${code}`)));
    child.once('message', (m: { ready: number }) =>
      resolve({
        child,
        port: m.ready,
        memory: () =>
          new Promise((res) => {
            child.once('message', (f) => res(f as MemoryFigures));
            child.send('memory');
          }),
      }),
    );
  });
}

/** The memory row: `sessions` PSK sessions opened against `srv` (bench/dtls-server.ts) and held idle; heap + external after GC per session. */
export async function idleSessionMemory(srv: Awaited<ReturnType<typeof startDtlsServer>>, psk: Buffer, sessions: number, setting: string): Promise<BenchRow> {
  const before = await srv.memory();
  const holder = spawn(LOAD, ['idle', '127.0.0.1', String(srv.port), '30', String(sessions), 'psk', 'idle', psk.toString('hex')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const connected = await new Promise<number>((resolve) => {
    holder.stdout.on('data', (d: Buffer) => {
      const m = /connected (\d+)/.exec(d.toString());
      if (m) resolve(Number(m[1]));
    });
  });
  const after = await srv.memory();
  holder.kill('SIGKILL');
  const per = (a: number, b: number) => Math.round((b - a) / Math.max(1, after.sessions - before.sessions));
  return {
    name: `memory per idle established DTLS session (${connected} sessions, ${setting}; heap + external after GC)`,
    value: per(before.heapUsed + before.external, after.heapUsed + after.external),
    unit: 'bytes/session',
    detail: `RSS ${per(before.rss, after.rss)} bytes/session; sessions counted by the server ${after.sessions - before.sessions}`,
    target: '<= 2048 bytes/session',
  };
}

/** libcoap's coap-server-openssl on 127.0.0.1 with `args` (credentials); its DTLS port is LIBCOAP_PORT + 1. */
const LIBCOAP_PORT = 25783 + PORT_SHIFT;
async function startLibcoap(args: string[]): Promise<ChildProcess> {
  const server = spawn('coap-server-openssl', ['-A', '127.0.0.1', '-p', String(LIBCOAP_PORT), '-v', '0', ...args], { stdio: 'ignore' });
  const failed = new Promise<never>((_, reject) => {
    server.once('error', (err) => reject(new Error(`coap-server-openssl did not start (apt-get install libcoap3-bin): ${err.message}`)));
    server.once('exit', (code) => reject(new Error(`coap-server-openssl exited ${code}`)));
  });
  await Promise.race([failed, new Promise((r) => setTimeout(r, 500))]);
  failed.catch(() => undefined);
  return server;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.removeAllListeners('exit');
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

export async function dtlsServerRows(opts: { seconds: number; idleSessions: number; procs: number }): Promise<BenchRow[]> {
  buildLoadGenerator();
  const psk = randomBytes(16);
  const rows: BenchRow[] = [];
  const certDir = makeCertificates();
  const srv = await startDtlsServer(psk, certDir);
  let ecdsa: Awaited<ReturnType<typeof runLoad>> | undefined;
  let hs: Awaited<ReturnType<typeof runLoad>> | undefined;
  try {
    ecdsa = await runLoad(opts.procs, () => [
      'hs',
      '127.0.0.1',
      String(srv.port),
      String(opts.seconds),
      'cert',
      path.join(certDir, 'client.pem'),
      path.join(certDir, 'client.key'),
      path.join(certDir, 'ca.pem'),
    ]);
    rows.push({
      name: `DTLS 1.2 full ECDHE-ECDSA handshakes (P-256, client certificate verified), ${opts.procs} OpenSSL clients, ${opts.seconds} s`,
      value: Math.round(ecdsa.ok / opts.seconds),
      unit: 'handshakes/s',
      p50Ms: ecdsa.p50Ms,
      p99Ms: ecdsa.p99Ms,
      errors: ecdsa.errors,
      target: '>= 300 handshakes/s',
    });
    hs = await runLoad(opts.procs, () => ['hs', '127.0.0.1', String(srv.port), String(opts.seconds), 'psk', 'bench', psk.toString('hex')]);
    rows.push({
      name: `DTLS 1.2 full PSK handshakes (CCM_8), ${opts.procs} OpenSSL clients back to back, ${opts.seconds} s`,
      value: Math.round(hs.ok / opts.seconds),
      unit: 'handshakes/s',
      p50Ms: hs.p50Ms,
      p99Ms: hs.p99Ms,
      errors: hs.errors,
      target: '>= 1500 handshakes/s',
    });

    await new Promise((r) => setTimeout(r, 500));
    rows.push(await idleSessionMemory(srv, psk, opts.idleSessions, 'no session store'));
    // as the gateway runs it by default (DTLS_KEEP_SESSIONS=on): the resumption cache in Redis, a small front in process
    const kept = await startDtlsServer(psk, undefined, true);
    try {
      rows.push(await idleSessionMemory(kept, psk, opts.idleSessions, 'sessions and resumption cache kept in Redis, the gateway default'));
    } finally {
      await stop(kept.child);
    }
  } finally {
    await stop(srv.child);
  }

  if (!ecdsa || !hs) return rows;
  // the same loads against libcoap (our server stopped), each row placed after ours; libcoap's -k takes the key as
  // text, so its key is printable and the clients get its hex form
  const ratio = (ours: { ok: number; suite: string }, native: { ok: number; suite: string }) =>
    `ours / libcoap = ${(ours.ok / Math.max(1, native.ok)).toFixed(2)}; suite negotiated: ours ${ours.suite || '-'}, libcoap ${native.suite || '-'}`;
  const key = Buffer.from(`bench-${randomBytes(8).toString('hex')}`);
  const after = (name: string, row: BenchRow) => rows.splice(rows.findIndex((r) => r.name.startsWith(name)) + 1, 0, row);
  let libcoap = await startLibcoap(['-k', key.toString()]);
  try {
    const native = await runLoad(opts.procs, () => ['hs', '127.0.0.1', String(LIBCOAP_PORT + 1), String(opts.seconds), 'psk', 'bench', key.toString('hex')]);
    after('DTLS 1.2 full PSK handshakes', {
      name: `DTLS 1.2 full PSK handshakes (CCM_8), ${opts.procs} OpenSSL clients back to back, ${opts.seconds} s, against libcoap coap-server-openssl -k`,
      value: Math.round(native.ok / opts.seconds),
      unit: 'handshakes/s',
      p50Ms: native.p50Ms,
      p99Ms: native.p99Ms,
      errors: native.errors,
      detail: ratio(hs, native),
      target: 'reference',
    });
  } finally {
    await stop(libcoap);
  }
  // certificate: -C makes libcoap verify the client certificate against ca.pem (as ours does; -n would turn that off)
  libcoap = await startLibcoap(['-c', path.join(certDir, 'server.pem'), '-j', path.join(certDir, 'server.key'), '-C', path.join(certDir, 'ca.pem')]);
  try {
    const native = await runLoad(opts.procs, () => [
      'hs',
      '127.0.0.1',
      String(LIBCOAP_PORT + 1),
      String(opts.seconds),
      'cert',
      path.join(certDir, 'client.pem'),
      path.join(certDir, 'client.key'),
      path.join(certDir, 'ca.pem'),
    ]);
    after('DTLS 1.2 full ECDHE-ECDSA handshakes', {
      name: `DTLS 1.2 full ECDHE-ECDSA handshakes (P-256, client certificate verified), ${opts.procs} OpenSSL clients, ${opts.seconds} s, against libcoap coap-server-openssl with a certificate`,
      value: Math.round(native.ok / opts.seconds),
      unit: 'handshakes/s',
      p50Ms: native.p50Ms,
      p99Ms: native.p99Ms,
      errors: native.errors,
      detail: ratio(ecdsa, native),
      target: 'reference',
    });
  } finally {
    await stop(libcoap);
  }
  return rows;
}
