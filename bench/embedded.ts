// The embedded default row: the service as `npm start` runs it (one process, DATABASE_URL unset, a fresh DATA_DIR),
// with how long it takes to answer /health and how much memory it and its database hold.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startBenchService, type BenchService } from './harness.ts';

/** Proportional set size (kB) of a process: shared pages (PostgreSQL's shared buffers) counted once across processes. */
function pssKb(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* ended meanwhile */
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const [child, parent] of parentOf) if (parent === out[i]) out.push(child);
  return out;
}

/** Memory (MB, PSS) of the service process and every process it started (an embedded PostgreSQL's server processes). */
export function serviceMemoryMb(svc: BenchService): number {
  const kb = svc.children.flatMap((c) => descendants(c.pid as number)).reduce((a, pid) => a + pssKb(pid), 0);
  return Math.round(kb / 1024);
}

export interface EmbeddedStart {
  svc: BenchService;
  startMs: number;
  idleMemoryMb: number;
  dataDir: string;
}

/** Starts the service on the embedded default in a fresh DATA_DIR; `startMs` runs from spawn to /health 200. */
export async function startEmbedded(): Promise<EmbeddedStart> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-bench-embedded-'));
  const t0 = performance.now();
  const svc = await startBenchService(['all'], {}, { embeddedDataDir: dataDir });
  const startMs = Math.round(performance.now() - t0);
  const stop = svc.stop;
  return {
    svc: {
      ...svc,
      stop: async () => {
        await stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    },
    startMs,
    idleMemoryMb: serviceMemoryMb(svc),
    dataDir,
  };
}
