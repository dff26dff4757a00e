// The audit log's cost per write: the same API write (label update through the REST API, in-process) on a service
// with AUDIT_LOG on and one with it off, on the same database, in alternating rounds back to back so both see the
// same machine load. With the log, the write runs in a transaction that names its author (BEGIN and the author
// in one round trip, then COMMIT) and the trigger writes the log row; without, the update alone.
import { performance } from 'node:perf_hooks';
import type { BenchRow } from './dtls.ts';
import { pct } from './harness.ts';
import { benchDatabase, benchDatabaseUrl } from './measurements.ts';
import { startTestApi, testContext, type ApiClient, type TestApi } from '../test/helpers.ts';

interface Writer { client: ApiClient; labelHashId: string }

async function writer(api: TestApi): Promise<Writer> {
  const client = await api.login('monitoring', ['READ', 'ISSUES']);
  const add = await client.request<{ hashId: string }>('POST', '/label/', { name: 'bench', color: '#000000' });
  return { client, labelHashId: add.body.hashId };
}

async function writeRound(w: Writer, writes: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < writes; i++) {
    const t0 = performance.now();
    const r = await w.client.request('POST', `/label/${w.labelHashId}`, { name: `bench ${i}` });
    times.push(performance.now() - t0);
    if (r.status !== 204) throw new Error(`label update answered ${r.status}`);
  }
  return times;
}

export async function auditCostRow(opts: { rounds: number; writes: number }): Promise<BenchRow> {
  const name = 'gridgate_bench_audit';
  await (await benchDatabase(name)).close();
  const on = await startTestApi(await testContext({ DATABASE_URL: benchDatabaseUrl(name), AUDIT_LOG: 'on' }));
  const off = await startTestApi(await testContext({ DATABASE_URL: benchDatabaseUrl(name), AUDIT_LOG: 'off' }));
  try {
    const writers = { on: await writer(on), off: await writer(off) };
    const times = { on: [] as number[], off: [] as number[] };
    // round 0 warms both up (JIT, pools, plans) and is not counted
    for (let round = 0; round <= opts.rounds; round++) {
      const order = round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const);
      for (const side of order) {
        const t = await writeRound(writers[side], opts.writes);
        if (round > 0) times[side].push(...t);
      }
    }
    // medians: on a shared machine a few writes wait on other processes for tens of ms, and a mean follows them
    const sorted = (a: number[]) => [...a].sort((x, y) => x - y);
    const [withLog, without] = [pct(sorted(times.on), 50), pct(sorted(times.off), 50)];
    const extra = ((withLog - without) / without) * 100;
    return {
      name: `audit log cost per API write (label update through the REST API, in-process), ${opts.rounds} alternating rounds of ${opts.writes} writes with AUDIT_LOG on and off`,
      value: Number(extra.toFixed(1)), unit: '% more time per write with the log (median)',
      p50Ms: Number(pct(sorted(times.on), 50).toFixed(3)), p99Ms: Number(pct(sorted(times.on), 99).toFixed(3)),
      target: 'under 5 %',
      detail: `median ${withLog.toFixed(3)} ms with the log, ${without.toFixed(3)} ms without; p99 without ${pct(sorted(times.off), 99).toFixed(3)} ms`,
    };
  } finally {
    await Promise.all([on.close(), off.close()]);
  }
}
