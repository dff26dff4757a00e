// Export of the bench measurement table (bench/measurements.ts: `total` measurements of 1,000 pins from
// 2025-01-01, made with generate_series): every measurement of the environment in one CSV, streamed from a
// cursor (src/monitoring/exports/writer.ts) in a child process, so its peak memory is the export's own.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BenchRow } from './dtls.ts';
import { root } from './harness.ts';
import type { MeasurementTable } from './measurements.ts';

interface ChildResult {
  ms: number;
  rows: number;
  bytes: number;
  startRssMb: number;
  peakRssMb: number;
}

export function exportRow(databaseUrl: string, table: MeasurementTable): BenchRow {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-export-bench-'));
  try {
    const [from, to] = ['2025-01-01T00:00:00Z', '2027-01-01T00:00:00Z'];
    const out = execFileSync(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', path.join(root, 'bench/export-child.ts'), databaseUrl, dir, from, to],
      { encoding: 'utf8', maxBuffer: 1 << 20 },
    );
    const r = JSON.parse(out.trim().split('\n').pop()!) as ChildResult;
    return {
      name: `export of ${r.rows.toLocaleString('en')} measurements (${from.slice(0, 10)} to ${to.slice(0, 10)}, table of ${table.measurements.toLocaleString('en')}) to CSV, streamed from a cursor`,
      value: Number((r.ms / 1000).toFixed(1)),
      unit: 's',
      target: 'streamed: peak memory independent of the rows exported',
      detail: `${Math.round(r.rows / (r.ms / 1000)).toLocaleString('en')} rows/s, ${(r.bytes / 2 ** 20).toFixed(0)} MiB of CSV, process RSS ${r.startRssMb.toFixed(0)} MiB before the export, peak ${r.peakRssMb.toFixed(0)} MiB`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
