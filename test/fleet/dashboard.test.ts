// The fleet's Grafana dashboard (deploy/grafana/dashboards/fleet.json) asks only for metrics a gateway node of the
// cluster really exposes: read back from a running service's /metrics, not from a list kept beside the dashboard.
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { killServiceProcesses, startServiceProcess } from '../support/service-process.ts';

afterAll(killServiceProcesses);

const dashboard = JSON.parse(readFileSync(new URL('../../deploy/grafana/dashboards/fleet.json', import.meta.url), 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
};

describe('the fleet dashboard', () => {
  it('queries only metrics a running cluster node exposes', async () => {
    const asked = new Set(dashboard.panels.flatMap((p) => p.targets.flatMap((t) => [...t.expr.matchAll(/\bgridgate_[a-z_]+/g)].map((m) => m[0]))));
    expect(asked.size).toBeGreaterThanOrEqual(10);
    const node = await startServiceProcess({ DATABASE_URL: process.env.DATABASE_URL!, DTLS_CLUSTER_PORT: '0', DTLS_CLUSTER_ADDRESS: '127.0.0.1' });
    const text = await (await fetch(`${node.base}/metrics`)).text();
    const exposed = new Set([...text.matchAll(/^# TYPE (gridgate_[a-z_]+) /gm)].map((m) => m[1]));
    expect([...asked].filter((name) => !exposed.has(name))).toEqual([]);
    node.child.kill('SIGTERM');
    await node.exited;
  }, 120_000);
});
