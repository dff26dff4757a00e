// Kept DTLS sessions (src/gateway/dtls-session-store.ts) on the real Redis: how fast a gateway hands its idle sessions over
// (suspend: every session's state sealed and written, pipelined) and how fast the next one carries them on (each
// loaded when its first record would arrive), and the memory an idle session carried on holds. Californium, for
// scale: 4,000 sessions saved in 44 ms, loaded in 54 ms.
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { BenchRow } from './dtls.ts';
import { root } from './harness.ts';

interface Timed {
  ms: number;
  cpuMs: number;
}
interface Figures {
  n: number;
  saved: number;
  save: Timed;
  load: Timed;
  loadCrash: Timed;
  perSession: number;
}

export async function keptSessionRows(opts: { sessions: number }): Promise<BenchRow[]> {
  const f = await new Promise<Figures>((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', '--disable-warning=ExperimentalWarning', path.join(root, 'bench/dtls-kept-child.ts')], {
      env: { ...process.env, BENCH_KEPT_SESSIONS: String(opts.sessions) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('close', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!) as Figures) : reject(new Error(`bench/dtls-kept-child.ts exited ${code}`)),
    );
  });
  const perSecond = (ms: number) => Math.round(f.n / (ms / 1000));
  const took = (t: Timed) => `${Math.round(t.ms)} ms (${Math.round(t.cpuMs)} ms CPU in the gateway process: ${perSecond(t.cpuMs)} sessions per CPU second)`;
  const californium = (sessions: number, ms: number) => `Californium ${Math.round(sessions / (ms / 1000))} sessions/s (${sessions} in ${ms} ms)`;
  return [
    {
      name: `kept DTLS sessions saved on hand-over (suspend: ${f.saved} idle sessions sealed and written to Redis, pipelined)`,
      value: perSecond(f.save.ms),
      unit: 'sessions/s',
      detail: `${took(f.save)}; ${californium(4000, 44)}`,
      target: '>= 50000 sessions/s',
    },
    {
      name: `kept DTLS sessions loaded after a hand-over (${f.n} sessions, each carried on as its first record arrives, 1,000 at once)`,
      value: perSecond(f.load.ms),
      unit: 'sessions/s',
      detail: `${took(f.load)}; after a crash (from handshake-time state) ${perSecond(f.loadCrash.ms)} sessions/s; ${californium(4000, 54)}`,
      target: '>= 50000 sessions/s',
    },
    {
      name: `memory per idle DTLS session carried on from Redis (${f.n} sessions; heap + external after GC)`,
      value: Math.round(f.perSession),
      unit: 'bytes/session',
      target: '<= 2048 bytes/session',
    },
  ];
}
