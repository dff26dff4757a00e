// The REST API fuzz of test/http/fuzz.test.ts run longer, with a fresh seed each time (printed, so
// a failure can be replayed): `npm run bench:fuzz -- --runs 5000 [--seed 123]`. Same property: no
// generated request (every route's body, query and path, hostile values spliced in) is answered
// 5xx or with an unkeyed error, and the service still answers afterwards. Real PostgreSQL
// (database gridgate_bench_fuzz, recreated) and Redis.
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseCli } from '../scripts/cli.ts';

const { values } = parseCli(
  {
    runs: { type: 'string', default: '3000', number: true, placeholder: 'n', description: 'requests to generate' },
    seed: { type: 'string', number: true, placeholder: 'n', description: "the generator's seed, to replay a failure (default: a fresh one, printed)" },
  },
  {
    usage: `usage: npm run bench:fuzz -- [options]
The REST API fuzz of test/http/fuzz.test.ts run longer: requests generated from every route's schemas with one hostile
value spliced in; none may be answered 5xx or with an unkeyed error. Real PostgreSQL (database gridgate_bench_fuzz,
recreated) and Redis (REDIS_URL). Exit 1 when a request failed.`,
  },
);
// the service's modules load after the command line is read: --help and a mistyped option answer at once
const { closeContext, createContext } = await import('../src/context.ts');
const { loadConfig } = await import('../src/settings.ts');
const { recreateDatabase } = await import('../src/app/db.ts');
const { createLogger } = await import('../src/app/logger.ts');
const { fuzz, startFuzzApi } = await import('../test/support/fuzz.ts');
const { benchDbName } = await import('./harness.ts');
const runs = Number(values.runs);
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const adminUrl = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const config = loadConfig({
  DATABASE_URL: await recreateDatabase(adminUrl, benchDbName('gridgate_bench_fuzz')),
  REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'gridgate-fuzz-')),
  SECRET_KEY: '33'.repeat(32),
  LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
  QUEUE_NAME: `bench-fuzz-${process.pid}`,
});
const ctx = await createContext(config, createLogger(config.logLevel));
const api = await startFuzzApi(ctx);
const started = Date.now();
const outcome = await fuzz(api, { seed, numRuns: runs });
const seconds = (Date.now() - started) / 1000;
const health = await api.app.inject({ method: 'GET', url: '/quantity/quantities', headers: api.headers });
await api.close();
await closeContext(ctx);

console.log(
  `REST fuzz: seed ${seed}, ${outcome.requests} requests over ${outcome.routes} routes in ${seconds.toFixed(1)} s (${(outcome.requests / seconds).toFixed(0)}/s)`,
);
console.log(
  `answers by status: ${Object.entries(outcome.byStatus)
    .map(([s, n]) => `${s}: ${n}`)
    .join(', ')}`,
);
console.log(`healthy afterwards: ${health.statusCode === 200 ? 'yes' : `no (${health.statusCode})`}`);
for (const f of outcome.failures) console.log(`FAILURE ${f.status} ${f.method} ${f.url}\n  body: ${f.payload}\n  answer: ${f.body}`);
console.log(`${outcome.requests - outcome.failures.length} passed, ${outcome.failures.length} failed`);
process.exitCode = outcome.failures.length > 0 || health.statusCode !== 200 ? 1 : 0;
