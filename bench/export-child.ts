// One export of the bench measurement table (bench/measurements.ts), written in a process of its own so its peak
// memory is the export's: `node bench/export-child.ts <DATABASE_URL> <dir> <from> <to>` prints {ms, rows, bytes,
// startRssMb, peakRssMb} as JSON.
import { performance } from 'node:perf_hooks';
import { openDb } from '../src/app/db.ts';
import { writeExport } from '../src/monitoring/exports/writer.ts';

const [databaseUrl, dir, from, to] = process.argv.slice(2);
const db = await openDb({ databaseUrl, dataDir: '/tmp', migrate: false });
const startRssMb = process.memoryUsage.rss() / 2 ** 20;
const t0 = performance.now();
const written = await writeExport(
  db,
  {
    id: 0,
    hashId: 'benchexport',
    environmentId: 1,
    environmentHashId: 'benchenv',
    scope: { kind: 'measurements', from, to },
    format: { delimiter: ',', rowDelimiter: '\n' },
  },
  dir,
  async () => undefined,
);
const ms = performance.now() - t0;
await db.close();
process.stdout.write(`${JSON.stringify({ ms, rows: written.rows, bytes: written.bytes, startRssMb, peakRssMb: process.resourceUsage().maxRSS / 1024 })}\n`);
