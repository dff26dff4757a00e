/**
 * A worker without the api role must be able to hand its reports to a monitoring core: without one it does not
 * start, with a wrong one (anything answering but not taking reports) it is refused at start, and while its
 * core does not answer its /health says so. Its /metrics are all `gridgate_*`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { mkdtempSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/ports.ts';
import { MAIN, startServiceProcess } from '../support/service-process.ts';

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

const DATABASE_URL = process.env.DATABASE_URL!;

/** Runs a worker process to its exit; its exit code and what it wrote on stderr. */
async function workerExit(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'worker'], {
    env: {
      PATH: process.env.PATH,
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      DATABASE_URL,
      LOG_LEVEL: 'silent',
      SECRET_KEY: '33'.repeat(32),
      API_PORT: String(await freePort()),
      DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'gridgate-w-')),
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const code = await new Promise<number | null>((r) => child.once('exit', r));
  clearTimeout(timer);
  return { code, stderr };
}

describe('a worker on its own', () => {
  it('does not start without MONITORING_CORE_URL', async () => {
    const { code, stderr } = await workerExit({});
    expect(code).toBe(1);
    expect(stderr).toMatch(/MONITORING_CORE_URL must be set for a worker without the api role/);
  }, 40_000);

  it('is refused at start when MONITORING_CORE_URL answers but takes no reports (404)', async () => {
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(404).end('{"key":"not_found_error","message":"No operation"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { code, stderr } = await workerExit({ MONITORING_CORE_URL: `http://127.0.0.1:${(server.address() as { port: number }).port}` });
      expect(code).toBe(1);
      expect(stderr).toMatch(/does not take condition reports \(monitoring core answered 404/);
    } finally {
      server.close();
    }
  }, 40_000);

  it('is unhealthy while its monitoring core does not answer, healthy once it does; its metrics carry one prefix', async () => {
    const corePort = await freePort();
    const QUEUE_NAME = `wstart-${process.pid}-${corePort}`;
    const worker = await startServiceProcess({ DATABASE_URL, QUEUE_NAME, MONITORING_CORE_URL: `http://127.0.0.1:${corePort}` }, ['worker'], {
      children,
      waitHealthy: false,
    });
    let health: Response | null = null;
    for (let i = 0; i < 100 && health?.status !== 503; i++) {
      await new Promise((r) => setTimeout(r, 100));
      health = await fetch(`${worker.base}/health`).catch(() => null);
    }
    expect(health?.status).toBe(503);
    const core = await startServiceProcess({ DATABASE_URL, QUEUE_NAME, API_PORT: String(corePort) }, ['api'], { children });
    let status = 0;
    for (let i = 0; i < 150 && status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await fetch(`${worker.base}/health`)).status;
    }
    expect(status).toBe(200);
    const metrics = await (await fetch(`${worker.base}/metrics`)).text();
    for (const name of [
      'gridgate_queue_jobs{state="waiting"}',
      'gridgate_queue_shard_jobs{shard="0",state="waiting"}',
      'gridgate_queue_jobs{state="failed"}',
      'gridgate_process_cpu_seconds_total',
    ])
      expect(metrics).toContain(name);
    const names = new Set(
      metrics
        .split('\n')
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => l.split(/[{ ]/)[0]),
    );
    expect([...names].filter((n) => !n.startsWith('gridgate_'))).toEqual([]);
    for (const p of [worker, core]) p.child.kill('SIGTERM');
    await Promise.all([worker.exited, core.exited]);
  }, 60_000);
});
