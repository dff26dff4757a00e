// CPU time of processes on this machine, read from /proc: where a benchmark's cycles go.
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

function processes(): { pid: number; ppid: number; comm: string; ticks: number }[] {
  const out = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const fields = stat.slice(close + 2).split(' ');
      out.push({ pid: Number(entry), ppid: Number(fields[1]), comm, ticks: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // the process ended while we looked
    }
  }
  return out;
}

/** Starts a measurement; the returned function gives CPU seconds per group since then. */
export function cpuMeter(groups: Record<string, (p: { pid: number; ppid: number; comm: string }) => boolean>): () => Record<string, number> {
  const before = new Map(processes().map((p) => [p.pid, p.ticks]));
  return () => {
    const result: Record<string, number> = Object.fromEntries(Object.keys(groups).map((g) => [g, 0]));
    for (const p of processes()) {
      const group = Object.keys(groups).find((g) => groups[g](p));
      if (group) result[group] += (p.ticks - (before.get(p.pid) ?? 0)) / TICKS_PER_SECOND;
    }
    return result;
  };
}

/** CPU seconds used so far by one process's main thread (its event loop), without its other threads. */
export function mainThreadSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}
