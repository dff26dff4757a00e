// Server CPU per DTLS handshake, robust on a shared machine: starts bench/dtls-server.ts (one key for every PSK
// identity, as bench/dtls.ts does), runs `procs` bench/dtls-load.c clients in `hs` mode and prints handshakes/s and the
// server process's CPU ms (utime + stime from /proc, all threads) per completed handshake.
//
//   node bench/dtls-cpu.ts [psk|cert] [seconds=10] [procs=4] [--prof <dir>] [--root <dir>]...
//   --prof: node --cpu-prof into <dir>
//   --root: the bench/dtls-server.ts of another checkout; given several times, those servers run at the same time,
//           each with its own `procs` clients, so an A/B comparison sees the same machine load (CPU speed on a shared
//           machine varies by tens of percent from one minute to the next)
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildLoadGenerator, makeCertificates, runLoad } from './dtls.ts';
import { root } from './harness.ts';

const args = process.argv.slice(2);
const option = (name: string): string[] => {
  const values: string[] = [];
  for (let at = args.indexOf(name); at >= 0; at = args.indexOf(name)) values.push(args.splice(at, 2)[1]);
  return values;
};
const profDir = option('--prof')[0];
const roots = option('--root');
if (roots.length === 0) roots.push(root);
const mode = args[0] === 'cert' ? 'cert' : 'psk';
const seconds = Number(args[1] ?? 10);
const procs = Number(args[2] ?? 4);

function times(pid: number): [number, number] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [Number(f[11]), Number(f[12])];
}

buildLoadGenerator();
const psk = randomBytes(16);
const certDir = mode === 'cert' ? makeCertificates() : undefined;
const children: ChildProcess[] = [];
const killChildren = () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
};
process.on('exit', killChildren);
process.on('uncaughtException', (err) => {
  console.error(err);
  killChildren();
  process.exit(1);
});
process.on('unhandledRejection', (err) => {
  console.error(err);
  killChildren();
  process.exit(1);
});

const servers = await Promise.all(
  roots.map((dir) => {
    const child = fork(path.join(dir, 'bench/dtls-server.ts'), [], {
      execArgv: ['--expose-gc', '--disable-warning=ExperimentalWarning', ...(profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [])],
      env: { ...process.env, BENCH_PSK: psk.toString('hex'), BENCH_PORT: '0', ...(certDir ? { BENCH_CERT_DIR: certDir } : {}) },
    });
    children.push(child);
    return new Promise<{ dir: string; child: ChildProcess; port: number }>((resolve) =>
      child.once('message', (m: { ready: number }) => resolve({ dir, child, port: m.ready })),
    );
  }),
);
const loadArgs = (port: number, secs: number) =>
  mode === 'psk'
    ? ['hs', '127.0.0.1', String(port), String(secs), 'psk', 'bench', psk.toString('hex')]
    : [
        'hs',
        '127.0.0.1',
        String(port),
        String(secs),
        'cert',
        path.join(certDir!, 'client.pem'),
        path.join(certDir!, 'client.key'),
        path.join(certDir!, 'ca.pem'),
      ];
// warm-up (JIT), not counted
await Promise.all(servers.map((s) => runLoad(procs, () => loadArgs(s.port, 1))));
const t0 = servers.map((s) => times(s.child.pid!));
const w0 = Date.now();
const results = await Promise.all(servers.map((s) => runLoad(procs, () => loadArgs(s.port, seconds))));
const t1 = servers.map((s) => times(s.child.pid!));
const wall = (Date.now() - w0) / 1000;
servers.forEach((s, i) => {
  const r = results[i];
  const userMs = (t1[i][0] - t0[i][0]) * 10;
  const sysMs = (t1[i][1] - t0[i][1]) * 10;
  const per = (ms: number) => Number((ms / Math.max(1, r.ok)).toFixed(3));
  console.log(
    JSON.stringify({
      server: roots.length > 1 ? s.dir : undefined,
      mode,
      handshakesPerS: Math.round(r.ok / wall),
      ok: r.ok,
      errors: r.errors,
      serverCpuMsPerHs: per(userMs + sysMs),
      userMsPerHs: per(userMs),
      sysMsPerHs: per(sysMs),
      serverCpuUtil: Number(((userMs + sysMs) / 1000 / wall).toFixed(2)),
      clientCpuMsPerHs: per(r.clientCpuMs),
      p50Ms: r.p50Ms,
      suite: r.suite,
      load: os.loadavg()[0].toFixed(2),
    }),
  );
});
killChildren();
await Promise.all(servers.map((s) => (s.child.exitCode === null ? new Promise((r2) => s.child.once('exit', r2)) : undefined)));
