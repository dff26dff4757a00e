/**
 * Which failures a device job waits out (the store is away) and which it may give up on (the same would
 * happen again), told from real errors: node-postgres against a closed port and a terminated session,
 * PostgreSQL refusing a statement, undici against a closed port, a monitoring core answering 404 or 400.
 */
import http from 'node:http';
import pg from 'pg';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Batcher } from '../../src/app/batcher.ts';
import { isTransient, StoreUnavailableError, transientDelayMs } from '../../src/pipeline/failures.ts';
import { MonitoringCoreClient } from '../../src/pipeline/monitoring-client.ts';
import type { ConditionReportIn } from '../../src/monitoring/reports/store.ts';
import { freePort } from '../support/ports.ts';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gridgate_test';
const errorOf = async (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err,
  );

// a local HTTP server standing in for a monitoring core that answers `status` to every request
let status = 404;
let server: http.Server;
let coreUrl: string;
beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(status, { 'content-type': 'application/json' }).end('{"key":"x","message":"no"}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  coreUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise((r) => server.close(r)));

const report: ConditionReportIn = {
  hashId: 'r1',
  environmentHashId: 'e',
  deviceHashId: 'd',
  reportTypeHashId: 't',
  generatedAt: '2026-11-01T00:00:00.000Z',
  fields: {},
  payload: '{}',
  measurements: [],
};

describe('transient or not', () => {
  it('a PostgreSQL nobody answers at, and a session the server ends, are waited out', async () => {
    const port = await freePort();
    const client = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${port}/x`, connectionTimeoutMillis: 2000 });
    expect(isTransient(await errorOf(client.connect()))).toBe(true);

    const victim = new pg.Client({ connectionString: DATABASE_URL });
    victim.on('error', () => undefined);
    await victim.connect();
    const terminated = await errorOf(victim.query('SELECT pg_terminate_backend(pg_backend_pid())'));
    expect((terminated as { code?: string }).code ?? (terminated as Error).message).toMatch(/57P01|terminat/);
    expect(isTransient(terminated)).toBe(true);
    await victim.end().catch(() => undefined);
  });

  it('a statement PostgreSQL refuses is not', async () => {
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      for (const sql of ['SELECT 1/0', "SELECT 'x'::int", 'SELEC 1', "SELECT E'a\\\\x00'::text::jsonb"]) {
        const err = await errorOf(client.query(sql));
        expect(isTransient(err), `${sql}: ${(err as Error).message}`).toBe(false);
      }
    } finally {
      await client.end();
    }
  });

  it('undici against a closed port is waited out; a bug of ours is not', async () => {
    const pool = new Pool(`http://127.0.0.1:${await freePort()}`);
    expect(isTransient(await errorOf(pool.request({ path: '/', method: 'GET' })))).toBe(true);
    await pool.close();
    expect(isTransient(new StoreUnavailableError('away'))).toBe(true);
    expect(isTransient(new TypeError("Cannot read properties of undefined (reading 'x')"))).toBe(false);
    expect(isTransient(new Error('wrapped', { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) }))).toBe(true);
  });

  it('a monitoring core that answers 404 (a wrong URL) is waited out and makes the probe say misconfigured; a 400 refuses the reports themselves', async () => {
    status = 404;
    const client = new MonitoringCoreClient({ url: coreUrl, token: 't' });
    expect(isTransient(await errorOf(client.push(report)))).toBe(true);
    expect(await client.probe()).toMatchObject({ state: 'misconfigured', reason: expect.stringMatching(/404/) });
    status = 400;
    expect(isTransient(await errorOf(client.push({ ...report, hashId: 'r2' })))).toBe(false);
    status = 200;
    expect(await client.probe()).toEqual({ state: 'ok' });
    await client.close();
    const nobody = new MonitoringCoreClient({ url: `http://127.0.0.1:${await freePort()}`, token: 't' });
    expect(await nobody.probe()).toMatchObject({ state: 'unreachable' });
    await nobody.close();
  });

  it('the delay of a store outage doubles per failure in a row up to 5 s', () => {
    const delays = [1, 2, 3, 4, 5, 6, 20, 100].map((n) => transientDelayMs(n));
    expect(delays[0]).toBeGreaterThanOrEqual(187);
    expect(delays[0]).toBeLessThanOrEqual(313);
    expect(delays[3]).toBeGreaterThanOrEqual(1500);
    for (const d of delays.slice(5)) expect(d).toBeLessThanOrEqual(6250);
    expect(Math.min(...delays.slice(5))).toBeGreaterThanOrEqual(3750);
  });
});

describe('a batched write the store refuses', () => {
  it('is split: only the refused item fails, the others of its batch are written', async () => {
    const written: string[] = [];
    const batcher = new Batcher<string>(
      async (items) => {
        if (items.includes('bad')) throw new Error('refused');
        written.push(...items);
      },
      { maxItems: 10, maxDelayMs: 5, splitOn: () => true },
    );
    const outcomes = await Promise.allSettled(['a', 'bad', 'c'].map((i) => batcher.add(i)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(written.sort()).toEqual(['a', 'c']);
  });

  it('is not split when the store is away: every item fails, to be run again', async () => {
    let flushes = 0;
    const batcher = new Batcher<string>(
      async () => {
        flushes++;
        throw new StoreUnavailableError('away');
      },
      { maxItems: 10, maxDelayMs: 5, splitOn: (err) => !isTransient(err) },
    );
    const outcomes = await Promise.allSettled(['a', 'b', 'c'].map((i) => batcher.add(i)));
    expect(outcomes.every((o) => o.status === 'rejected')).toBe(true);
    expect(flushes).toBe(1);
  });
});
