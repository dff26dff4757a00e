// The report path with threshold evaluation on and off, in the same run:
// - end to end: linked PSK devices over HTTPS keep-alive into one process (role all), started with
//   THRESHOLD_EVALUATION=off and =on (off, on, on, off), every pin under limits that a fifth of the values cross
//   (so issues open and stay open: every batch also runs the issue statement);
// - the store step alone: ingest statement, then the evaluation, against ingest alone, alternating batches.
import { createEnvironment, createMachineAccount } from '../src/accounts/store.ts';
import { cpuMeter } from './cpu.ts';
import type { BenchRow } from './dtls.ts';
import { api, HTTPS_PORT, pct, provision, startBenchService, storedReports } from './harness.ts';
import { benchDatabase, ingestWorld } from './measurements.ts';
import { runPskDevice } from './psk-client.ts';

// the bench parser stores v * 100 at orderOfMagnitude -2; devices send v in [0, 10]: low 1.00 and high 9.00 are crossed by a fifth
const LIMITS = { criticallyLow: null, low: { orderOfMagnitude: -2, significand: 100 }, high: { orderOfMagnitude: -2, significand: 900 }, criticallyHigh: null };

/** Links every device of a fresh connectivity environment to its own pin group and pin in a monitoring environment, with LIMITS on each pin. */
async function linkedDevices(svc: Awaited<ReturnType<typeof startBenchService>>, devices: number) {
  const supplier = await provision(svc, devices);
  const env = await createEnvironment(svc.db, 'monitoring', 'bench customer');
  const account = await createMachineAccount(svc.db, env.hashId, ['READ', 'STATIC', 'SENSORS', 'THRESHOLDS']);
  const { jwt } = await api(svc.base, { 'api-version': '8' }, 'POST', '/authentication/machine-login', { assertion: account.assertion });
  const h = { 'api-version': '8', 'environment-hash-id': env.hashId, authorization: `Bearer ${jwt}` };
  const quantity = (await svc.db.query<{ hash_id: string }>('SELECT hash_id FROM quantity WHERE environment_id = $1', [supplier.environment.id])).rows[0]
    .hash_id;
  const thresholds: unknown[] = [];
  for (let i = 0; i < supplier.devices.length; i += 30) {
    const chunk = supplier.devices.slice(i, i + 30);
    const tokens = (await api(svc.base, supplier.headers, 'POST', '/device/claim-tokens', { deviceHashIds: chunk.map((d) => d.hashId) })) as unknown as {
      claimTokens: { claimToken: string }[];
    };
    await api(svc.base, h, 'POST', '/device/claim', { claimTokens: tokens.claimTokens.map((t) => t.claimToken) });
  }
  for (const [i, d] of supplier.devices.entries()) {
    const pg = await api(svc.base, h, 'POST', '/graph/pin-group', { symbolKey: 's', geometry: null, fields: { id: `bench ${i}` } });
    const pin = ((await api(svc.base, h, 'POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'Level' } })) as unknown as { pin: { hashId: string } })
      .pin.hashId;
    await api(svc.base, h, 'POST', `/device/${d.hashId}/link`, { pinGroupHashId: pg.hashId, channelMapping: [{ channel: 0, pinHashId: pin }] });
    thresholds.push({ pinHashId: pin, quantityHashId: quantity, thresholds: LIMITS });
  }
  for (let i = 0; i < thresholds.length; i += 500) await api(svc.base, h, 'POST', '/measurement-threshold/thresholds', thresholds.slice(i, i + 500));
  // the worker's device cache learns of the links within its TTL (2 s)
  await new Promise((r) => setTimeout(r, 2500));
  return { supplier, customerEnvironmentId: env.id };
}

async function endToEnd(evaluation: 'on' | 'off', opts: { devices: number; seconds: number; warmup: number }): Promise<BenchRow> {
  const svc = await startBenchService(['all'], { THRESHOLD_EVALUATION: evaluation });
  try {
    const { supplier, customerEnvironmentId } = await linkedDevices(svc, opts.devices);
    const warmupEnd = Date.now() + opts.warmup * 1000;
    const end = warmupEnd + opts.seconds * 1000;
    let meter: (() => Record<string, number>) | null = null;
    const startMeter = setTimeout(() => {
      meter = cpuMeter({ service: (p) => p.pid === svc.children[0].pid, postgres: (p) => p.comm.startsWith('postgres') });
    }, opts.warmup * 1000);
    const stats = await Promise.all(
      supplier.devices.map((d) => runPskDevice({ port: HTTPS_PORT, identity: d.identity, key: d.key, measureFrom: warmupEnd, until: end })),
    );
    clearTimeout(startMeter);
    const cpu = (meter as (() => Record<string, number>) | null)?.() ?? {};
    const measured = stats.reduce((a, s) => a + s.acknowledged, 0);
    const acked = stats.reduce((a, s) => a + s.acknowledged + s.acknowledgedWarmup, 0);
    const latencies = stats.flatMap((s) => s.latenciesMs).sort((a, b) => a - b);
    const stored = await storedReports(svc.db, supplier.environment.id, acked);
    const {
      rows: [counts],
    } = await svc.db.query<{ on_pins: number; issues: number }>(
      `SELECT (SELECT count(*) FROM measurement m JOIN pin p ON p.id = m.pin_id WHERE p.environment_id = $1)::int AS on_pins,
              (SELECT count(*) FROM issue WHERE environment_id = $1)::int AS issues`,
      [customerEnvironmentId],
    );
    const cpuMs = Object.entries(cpu)
      .map(([k, v]) => `${k} ${((v * 1000) / Math.max(1, measured)).toFixed(3)}`)
      .join(', ');
    return {
      name: `HTTPS TLS-PSK reports, ${opts.devices} linked devices with thresholds, 1 process (all), threshold evaluation ${evaluation}`,
      value: Math.round(measured / opts.seconds),
      unit: 'reports/s',
      p50Ms: Number(pct(latencies, 50).toFixed(2)),
      p99Ms: Number(pct(latencies, 99).toFixed(2)),
      errors: stats.reduce((a, s) => a + s.errors, 0),
      target: 'on costs <= 5 % of off',
      detail: `${acked} acked, ${stored} stored, ${counts.on_pins} on pins, ${counts.issues} issues; CPU ms/report: ${cpuMs}`,
    };
  } finally {
    await svc.stop();
  }
}

/**
 * The store step of a batch of 50 linked reports with evaluation (ingest statement, then evaluateThresholds)
 * against without (ingest alone), alternating, in one database; a fifth of the values cross a limit.
 */
async function storeStep(opts: { batches: number }): Promise<BenchRow[]> {
  const db = await benchDatabase('gridgate_bench_thresholds');
  const { ingestReportsJson } = await import('../src/monitoring/reports/store.ts');
  const { ThresholdEvaluator } = await import('../src/monitoring/thresholds/evaluate.ts');
  const { ThresholdCache } = await import('../src/monitoring/thresholds/cache.ts');
  try {
    await ingestWorld(db, 50, 50);
    await db.query(
      `INSERT INTO pin_group (hash_id, environment_id, name, symbol_key, map_layer) SELECT 'pg' || i, 2, 'g', 's', 'default' FROM generate_series(0, 49) i`,
    );
    await db.query(`INSERT INTO pin (hash_id, environment_id, pin_group_id, name) SELECT 'p' || i, 2, i + 1, 'p' FROM generate_series(0, 49) i`);
    await db.query(`INSERT INTO device_link (hash_id, environment_id, device_id, pin_group_id) SELECT 'l' || i, 2, i + 1, i + 1 FROM generate_series(0, 49) i`);
    await db.query('INSERT INTO device_link_channel (link_id, channel, pin_id) SELECT i, 0, i FROM generate_series(1, 50) i');
    await db.query(
      `INSERT INTO pin_threshold (hash_id, environment_id, pin_id, quantity_id, low, high) SELECT 't' || i, 2, i, 1, '{"orderOfMagnitude": 0, "significand": 10}', '{"orderOfMagnitude": 0, "significand": 90}' FROM generate_series(1, 50) i`,
    );
    const evaluator = new ThresholdEvaluator(db.deferred, null, new ThresholdCache());
    let n = 0;
    const batch = () =>
      Array.from({ length: 50 }, (_, i) => {
        const at = new Date(Date.UTC(2026, 0, 1) + n++ * 1000).toISOString();
        return {
          hashId: `r${n}`,
          environmentHashId: 'supplier',
          deviceHashId: `d${i}`,
          reportTypeHashId: 'rt',
          generatedAt: at,
          fields: {},
          payload: '{}',
          linkId: i + 1,
          measurements: [
            {
              hashId: `m${n}`,
              channelIndex: 0,
              channelMeasurementIndex: 0,
              quantityHashId: 'q',
              generatedAt: at,
              orderOfMagnitude: 0,
              significand: Math.floor(Math.random() * 100),
              pinId: i + 1,
            },
          ],
        };
      });
    const times: Record<'on' | 'off', number[]> = { on: [], off: [] };
    for (let b = 0; b < opts.batches; b++) {
      for (const kind of (b % 2 === 0 ? ['on', 'off'] : ['off', 'on']) as ('on' | 'off')[]) {
        const reports = batch();
        const t0 = performance.now();
        // as the worker writes: on the deferred-commit pool
        await ingestReportsJson(db.deferred, JSON.stringify({ reports }));
        if (kind === 'on') await evaluator.evaluate(reports);
        times[kind].push(performance.now() - t0);
      }
    }
    await evaluator.close();
    const {
      rows: [check],
    } = await db.query<{ issues: number }>('SELECT count(*)::int AS issues FROM issue');
    return (['off', 'on'] as const).map((kind) => {
      const sorted = times[kind].sort((a, b) => a - b);
      return {
        name: `store step, 50 linked reports with thresholds, evaluation ${kind} (alternating batches)`,
        value: Number(pct(sorted, 50).toFixed(2)),
        unit: 'ms per batch (p50)',
        p50Ms: Number(pct(sorted, 50).toFixed(2)),
        p99Ms: Number(pct(sorted, 99).toFixed(2)),
        target: 'on close to off',
        detail: `${sorted.length} batches; ${check.issues} issues opened`,
      };
    });
  } finally {
    await db.close();
  }
}

/**
 * `--thresholds on`: the rows of the report path with threshold evaluation off and on. The end-to-end
 * runs go off, on, on, off (the first run of a series measured slower whichever setting it had) and
 * each row shows the mean of its two runs.
 */
export async function thresholdRows(opts: { devices: number; seconds: number; warmup: number; batches: number }): Promise<BenchRow[]> {
  const runs: BenchRow[] = [];
  for (const evaluation of ['off', 'on', 'on', 'off'] as const) runs.push(await endToEnd(evaluation, opts));
  const mean = (a: BenchRow, b: BenchRow): BenchRow => ({
    ...a,
    value: Math.round((a.value + b.value) / 2),
    p50Ms: Number((((a.p50Ms ?? 0) + (b.p50Ms ?? 0)) / 2).toFixed(2)),
    p99Ms: Number((((a.p99Ms ?? 0) + (b.p99Ms ?? 0)) / 2).toFixed(2)),
    errors: (a.errors ?? 0) + (b.errors ?? 0),
    detail: `mean of 2 runs (${a.value}, ${b.value} reports/s); ${a.detail}`,
  });
  const off = mean(runs[0], runs[3]);
  const on = mean(runs[1], runs[2]);
  on.detail = `${(((off.value - on.value) / Math.max(1, off.value)) * 100).toFixed(1)} % below off; ${on.detail}`;
  return [off, on, ...(await storeStep({ batches: opts.batches }))];
}
