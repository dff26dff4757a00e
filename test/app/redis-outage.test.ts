// A Redis outage as an operator sees it in the log: the service (`node scripts/start.mjs`, every
// role, so BullMQ queues and workers, subscribers and the context's connection) runs on a private
// redis-server that is killed and started again on the same port. The log stays JSON, the outage is
// one warn line and its end one info line, and the service answers /health throughout.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { TEST_SECRET, testConfig } from '../helpers.ts';
import { exited, killPrivateRedis, startRedis } from '../support/private-redis.ts';

const root = path.resolve(import.meta.dirname, '../..');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  killPrivateRedis();
});

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

describe('a Redis outage in the log', () => {
  it('JSON only; one warn line when Redis goes, one info line when it is back; /health answers after', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-redis-outage-'));
    const redisPort = await freePort();
    let redis = await startRedis(redisPort, dir);
    const service = spawn(process.execPath, [path.join(root, 'scripts/start.mjs')], {
      cwd: root,
      env: {
        ...process.env,
        DATABASE_URL: testConfig().databaseUrl ?? '',
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        DATA_DIR: dir,
        CERTS_DIR: path.join(dir, 'certs'),
        SECRET_KEY: TEST_SECRET,
        API_PORT: '0',
        HTTPS_DEVICE_PORT: '0',
        COAPS_PORT: '0',
        QUEUE_NAME: `outage-${randomBytes(4).toString('hex')}`,
        LOG_LEVEL: 'info',
        ROLE: 'all',
      },
    });
    children.push(service);
    let stdout = '';
    let stderr = '';
    service.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    service.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const lines = () => stdout.split('\n').filter((l) => l.trim() !== '');
    const parsed = () => lines().map((l) => JSON.parse(l) as LogLine);
    const find = (msg: string) => parsed().filter((l) => l.msg === msg);

    await vi.waitFor(() => expect(find('service ready')).toHaveLength(1), { timeout: 30_000, interval: 100 });
    const apiPort = find('service ready')[0].apiPort as number;
    const health = async () => {
      const res = await fetch(`http://127.0.0.1:${apiPort}/health`);
      return { status: res.status, body: (await res.json()) as unknown };
    };
    expect(await health()).toEqual({ status: 200, body: { status: 'ok' } });

    redis.kill('SIGKILL');
    await exited(redis);
    await vi.waitFor(() => expect(parsed().some((l) => l.level === 40)).toBe(true), { timeout: 15_000, interval: 50 });
    // an outage of a few seconds: every connection (context, subscribers, BullMQ's) fails attempt after attempt
    await new Promise((r) => setTimeout(r, 3000));
    expect(await health()).toEqual({ status: 200, body: { status: 'ok' } });
    redis = await startRedis(redisPort, dir);
    await vi.waitFor(() => expect(find('redis available again')).toHaveLength(1), { timeout: 20_000, interval: 50 });
    expect(await health()).toEqual({ status: 200, body: { status: 'ok' } });

    service.kill('SIGTERM');
    await exited(service);
    redis.kill('SIGTERM');
    await exited(redis);

    // every line is one JSON object, on stdout; nothing raw on stderr
    for (const line of lines()) expect(() => JSON.parse(line), line).not.toThrow();
    expect(stderr).toBe('');
    const warnings = parsed().filter((l) => l.level >= 40);
    expect(warnings.map((l) => [l.level, l.msg])).toEqual([[40, 'redis unavailable; every connection keeps retrying (one line per outage)']]);
    expect(warnings[0].err).toContain('ECONNREFUSED');
    const back = find('redis available again');
    expect(back).toHaveLength(1);
    expect(back[0].level).toBe(30);
    // the one warn line stands for many failed attempts
    expect(back[0].failedAttempts).toBeGreaterThan(1);
  }, 90_000);
});
