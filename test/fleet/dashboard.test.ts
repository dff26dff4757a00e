// The fleet's Grafana dashboard (deploy/grafana/dashboards/fleet.json) tells the truth: Debian's Prometheus scrapes two
// service processes labelled as the fleet labels its targets (`node`, `role`), both workers of one queue, and every
// panel query is run through its HTTP API. Each answers with series (or is named below as having none in this setup),
// the queue depth is what Redis holds (not once per worker), and no label came back renamed `exported_*`.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/app/db.ts';
import { bullQueue } from '../../src/app/redis-keys.ts';
import { connectivityClient, pskDevice } from '../support/provision.ts';
import { connectReporters, type CoapReporter } from '../support/coap-reporters.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { reportingDevices } from '../support/report-world.ts';
import { freePort, killServiceProcesses, startServiceProcess } from '../support/service-process.ts';
import { until } from '../support/until.ts';

const dashboard = JSON.parse(readFileSync(new URL('../../deploy/grafana/dashboards/fleet.json', import.meta.url), 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
};

/** Grafana's own variables, as Grafana would fill them in for a short range. */
const GRAFANA_VARIABLES: Record<string, string> = { $__rate_interval: '1m', $__interval: '30s', $__range: '1m' };
const queries = dashboard.panels.flatMap((p) =>
  p.targets.map((t) => ({
    panel: p.title,
    expr: t.expr.replace(/\$__[a-z_]+/g, (v) => {
      if (!(v in GRAFANA_VARIABLES)) throw new Error(`panel "${p.title}": no stand-in for ${v}`);
      return GRAFANA_VARIABLES[v];
    }),
  })),
);

/**
 * Queries whose metric has no sample in this setup, and why: a counter with labels shows nothing until its first event.
 * Each is still checked to be exposed by name, and to come back empty (so a new sample makes this list be revisited).
 */
const NO_SAMPLE_HERE: Record<string, string> = {
  'sum by (node, kind, direction) (rate(gridgate_dtls_cluster_forwarded_total[1m]))': 'one gateway node: no record is forwarded to another',
  'sum by (reason) (rate(gridgate_dtls_cluster_failures_total[1m]))': 'one gateway node and only its own CIDs: nothing to misroute',
  'sum(rate(gridgate_gateway_coap_failures_total[1m]))': 'the devices here report over HTTPS; no CoAP exchange throws',
};

const QUEUE_NAME = `dash-${process.pid}`;
const SHARDS = 2;
/** Jobs put in shard 1, delayed by an hour: a depth that stays put while Prometheus and Redis are compared. */
const PARKED = 3;

const children: ChildProcess[] = [];
const tmp = mkdtempSync(path.join(os.tmpdir(), 'gridgate-prom-'));
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
const shards = Array.from({ length: SHARDS }, (_, shard) => {
  const { name, prefix } = bullQueue({ redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', redisClusterNodes: [] }, QUEUE_NAME, shard);
  return new Queue(name, { connection: redis, prefix });
});

afterAll(async () => {
  killServiceProcesses();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const q of shards) await q.obliterate({ force: true }).catch(() => undefined);
  await Promise.all(shards.map((q) => q.close()));
  await redis.quit();
  rmSync(tmp, { recursive: true, force: true });
});

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** Prometheus's answer to an instant query: its vector. */
async function query(base: string, expr: string): Promise<Sample[]> {
  const res = await fetch(`${base}/api/v1/query?${new URLSearchParams({ query: expr })}`);
  const body = (await res.json()) as { status: string; error?: string; data?: { resultType: string; result: Sample[] } };
  if (body.status !== 'success') throw new Error(`${expr}: ${body.error}`);
  if (body.data!.resultType !== 'vector') throw new Error(`${expr}: a ${body.data!.resultType}, not a vector`);
  return body.data!.result;
}

/** Every shard's job counts by state, as the workers read them (the states of gridgate_queue_shard_jobs). */
async function redisDepth(): Promise<Record<string, number>> {
  const depth: Record<string, number> = {};
  for (const [shard, q] of shards.entries()) {
    for (const [state, n] of Object.entries(await q.getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized'))) depth[`${shard}/${state}`] = n;
  }
  return depth;
}

const exportedLabels = (samples: Sample[]) =>
  samples.flatMap((s) =>
    Object.keys(s.metric)
      .filter((k) => k.startsWith('exported_'))
      .map((k) => `${s.metric.__name__ ?? ''}{${k}}`),
  );

describe('the fleet dashboard, through a real Prometheus', () => {
  it('every panel query answers, counts the queue once, and sees no exported_* label', async () => {
    const version = spawnSync('prometheus', ['--version'], { encoding: 'utf8' });
    if (version.error || version.status !== 0) {
      throw new Error("the prometheus binary is not on PATH: install Debian's prometheus package (apt-get install prometheus; .ci/run does)");
    }
    const DATABASE_URL = process.env.DATABASE_URL!;
    const common = { DATABASE_URL, QUEUE_NAME, QUEUE_SHARDS: String(SHARDS) };
    // every role (its gateway a CID-routed cluster of one node, for the cluster's metrics), and a second worker of the same queue
    const coapsPort = await freePort();
    const all = await startServiceProcess({ ...common, COAPS_PORT: String(coapsPort), DTLS_CLUSTER_PORT: '0', DTLS_CLUSTER_ADDRESS: '127.0.0.1' });
    const worker = await startServiceProcess({ ...common, MONITORING_CORE_URL: all.base }, ['worker']);

    for (const q of shards.slice(1)) for (let i = 0; i < PARKED; i++) await q.add('parked', {}, { delay: 3_600_000 });

    // a few reports (handler and parser runs, reports stored), a handshake with a wrong key, a handler that throws, and
    // DTLS sessions held open (sessions started, sessions per node)
    let dtls: CoapReporter[];
    const db = await openDb({ databaseUrl: DATABASE_URL, dataDir: tmp, migrate: false });
    try {
      const api = await connectivityClient(db, all.base);
      const reporters = await reportingDevices(api, 2);
      const thrower = await pskDevice(api, 'function handle() { throw new Error("supplier bug"); }');
      for (const [d, device] of reporters.entries()) {
        for (let seq = 0; seq < 3; seq++) {
          const answer = await pskHttpRequest({
            port: all.httpsPort,
            identity: device.identity,
            key: device.key,
            path: '/report',
            body: JSON.stringify({ d, seq }),
          });
          expect([200, 202]).toContain(answer?.status);
        }
      }
      await pskHttpRequest({ port: all.httpsPort, identity: thrower.identity, key: thrower.key, path: '/report', body: '{}' });
      await pskHttpRequest({ port: all.httpsPort, identity: reporters[0].identity, key: Buffer.alloc(16), path: '/report', body: '{}' });
      dtls = await connectReporters(coapsPort, reporters);
    } finally {
      await db.close();
    }

    // the fleet's targets: a file_sd list as `npm run fleet` writes it, scraped every second
    const targets = [
      { targets: [new URL(all.base).host], labels: { node: 'all-1', role: 'all' } },
      { targets: [new URL(worker.base).host], labels: { node: 'worker-1', role: 'worker' } },
    ];
    writeFileSync(path.join(tmp, 'targets.json'), JSON.stringify(targets));
    writeFileSync(
      path.join(tmp, 'prometheus.yml'),
      JSON.stringify({
        global: { scrape_interval: '1s', evaluation_interval: '1s' },
        scrape_configs: [{ job_name: 'gridgate', file_sd_configs: [{ files: [path.join(tmp, 'targets.json')] }] }],
      }),
    );
    const promPort = await freePort();
    const prometheus = spawn(
      'prometheus',
      [`--config.file=${path.join(tmp, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(tmp, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    children.push(prometheus);
    let promLog = '';
    prometheus.stderr!.on('data', (d: Buffer) => {
      promLog += d.toString();
    });
    const prom = `http://127.0.0.1:${promPort}`;
    await until(
      () =>
        fetch(`${prom}/-/ready`).then(
          (r) => r.status,
          () => prometheus.exitCode ?? 0,
        ),
      (s) => s === 200 || prometheus.exitCode !== null,
      'prometheus ready',
    );
    if (prometheus.exitCode !== null) throw new Error(`prometheus exited: ${promLog}`);
    await until(
      () => query(prom, 'up == 1'),
      (r) => r.length === 2,
      'both targets up',
    );

    // every name the dashboard asks for is one a process exposes
    const exposed = new Set<string>();
    for (const p of [all, worker])
      for (const m of (await (await fetch(`${p.base}/metrics`)).text()).matchAll(/^# TYPE (gridgate_[a-z_]+) /gm)) exposed.add(m[1]);
    const asked = new Set(queries.flatMap((q) => [...q.expr.matchAll(/\bgridgate_[a-z_]+/g)].map((m) => m[0])));
    expect(asked.size).toBeGreaterThanOrEqual(10);
    expect([...asked].filter((name) => !exposed.has(name))).toEqual([]);
    expect(Object.keys(NO_SAMPLE_HERE).filter((expr) => !queries.some((q) => q.expr === expr))).toEqual([]);

    // each panel query answers with series (a rate needs two scrapes in its window: wait for them)
    for (const q of queries) {
      if (q.expr in NO_SAMPLE_HERE) continue;
      const result = await until(
        () => query(prom, q.expr),
        (r) => r.length > 0,
        `series for "${q.panel}": ${q.expr}`,
        30_000,
        250,
      );
      expect(exportedLabels(result), q.expr).toEqual([]);
    }
    for (const expr of Object.keys(NO_SAMPLE_HERE)) expect(await query(prom, expr), `${expr} (${NO_SAMPLE_HERE[expr]})`).toEqual([]);

    // the queue depth panel shows what Redis holds, shard by shard and state by state: once, not once per worker
    const depthQuery = queries.find((q) => q.expr.includes('gridgate_queue_shard_jobs'))!.expr;
    expect(await query(prom, 'count(gridgate_queue_shard_jobs{shard="1",state="delayed"})')).toMatchObject([{ value: [expect.any(Number), '2'] }]);
    const asShown = async () => Object.fromEntries((await query(prom, depthQuery)).map((s) => [`${s.metric.shard}/${s.metric.state}`, Number(s.value[1])]));
    let last: { shown: Record<string, number>; held: Record<string, number> } = { shown: {}, held: {} };
    await until(
      async () => {
        const held = await redisDepth();
        last = { shown: await asShown(), held };
        return last;
      },
      ({ shown, held }) => JSON.stringify(shown, Object.keys(held).sort()) === JSON.stringify(held, Object.keys(held).sort()),
      'the queue depth panel to show what Redis holds',
      20_000,
      250,
    );
    expect(last.held['1/delayed']).toBeGreaterThanOrEqual(PARKED);
    expect(last.shown).toEqual(last.held);

    // no metric of either process carries a label Prometheus had to rename (node, role, job, instance)
    expect(exportedLabels(await query(prom, '{__name__=~"gridgate_.+"}'))).toEqual([]);

    for (const r of dtls) r.close();
    // Prometheus gone before afterAll removes its storage folder
    const promExited = new Promise((r) => prometheus.once('exit', r));
    prometheus.kill('SIGTERM');
    for (const p of [all, worker]) p.child.kill('SIGTERM');
    await Promise.all([all.exited, worker.exited, promExited]);
  }, 90_000);
});
