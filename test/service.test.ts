import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb } from '../src/app/db.ts';
import { connectivityClient, pskDevice } from './support/provision.ts';
import { pskHttpRequest } from './support/psk-client.ts';
import { until } from './support/until.ts';
import { admin, freePort, killServiceProcesses, MAIN, startProcess, startServiceProcess } from './support/service-process.ts';

afterAll(killServiceProcesses);

describe('the service process', () => {
  it('starts with no configuration on the embedded PostgreSQL; the admin CLI works beside it; SIGTERM exits cleanly', async () => {
    const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-embedded-'));
    const { child, base, exited } = await startProcess({ DATA_DIR });
    const env = admin({ DATA_DIR }, 'create-environment', '--type', 'connectivity', '--name', 'Embedded');
    expect(env).toMatchObject({ type: 'connectivity', name: 'Embedded', hashId: expect.stringMatching(/^[a-z0-9]+$/) });
    const account = admin({ DATA_DIR }, 'create-machine-account', '--environment', env.hashId, '--rights', 'ENVIRONMENT_ADMIN');
    expect(Object.keys(account).sort()).toEqual(['assertion', 'hashId']);
    const login = await fetch(`${base}/authentication/machine-login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'api-version': '5' },
      body: JSON.stringify({ assertion: account.assertion }),
    });
    expect(login.status).toBe(200);
    expect(((await login.json()) as { environment: { hashId: string } }).environment.hashId).toBe(env.hashId);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 120_000);

  it('`npm start` stops cleanly when SIGTERM reaches npm alone (as a process supervisor or `kill <pid>` sends it)', async () => {
    const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-npm-'));
    const { child, base, exited } = await startServiceProcess(
      { DATABASE_URL: process.env.DATABASE_URL!, DATA_DIR, CERTS_DIR: path.join(DATA_DIR, 'certs') },
      [],
      { npm: true },
    );
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    // the service itself is gone too, not left running without its parent
    expect(
      await fetch(`${base}/health`).then(
        (r) => r.status,
        () => 'refused',
      ),
    ).toBe('refused');
  }, 120_000);

  it('on SIGTERM answers the requests in flight, finishes their jobs, and loses nothing it accepted', async () => {
    const DATABASE_URL = process.env.DATABASE_URL!;
    const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-stop-'));
    const { child, base, httpsPort, exited } = await startProcess({ DATABASE_URL, DATA_DIR, SHUTDOWN_GRACE_MS: '8000' });
    const db = await openDb({ databaseUrl: DATABASE_URL, dataDir: DATA_DIR, migrate: false });
    try {
      const api = await connectivityClient(db, base);
      // a handler that takes ~300 ms, so requests are still running when SIGTERM arrives
      const device = await pskDevice(
        api,
        `function handle(args: Arguments, exec: Exec) {
        const until = Date.now() + 300; while (Date.now() < until) {}
        exec.addLog('done');
        return { statusCode: 200, body: { ok: true } };
      }`,
      );
      const requests = Array.from({ length: 8 }, (_, i) =>
        pskHttpRequest({ port: httpsPort, identity: device.identity, key: device.key, path: `/r${i}`, body: '{}' }),
      );
      await new Promise((r) => setTimeout(r, 150));
      child.kill('SIGTERM');
      const answers = await Promise.all(requests);
      expect(await exited).toBe(0);
      const accepted = answers.filter((a) => a && (a.status === 200 || a.status === 202));
      expect(accepted).toHaveLength(8);
      const { rows } = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1 AND NOT a.failed`,
        [device.hashId],
      );
      expect(rows[0].n).toBe(8);
      // and nothing accepts new connections any more
      expect(await pskHttpRequest({ port: httpsPort, identity: device.identity, key: device.key, path: '/late', body: '{}' })).toBeNull();
    } finally {
      await db.close();
    }
  }, 60_000);

  it('answers 202 when the handler is not done within GATEWAY_WAIT_MS, and still processes the request', async () => {
    const DATABASE_URL = process.env.DATABASE_URL!;
    const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-wait-'));
    const { child, base, httpsPort, exited } = await startProcess({ DATABASE_URL, DATA_DIR, GATEWAY_WAIT_MS: '100' });
    const db = await openDb({ databaseUrl: DATABASE_URL, dataDir: DATA_DIR, migrate: false });
    try {
      const api = await connectivityClient(db, base);
      const device = await pskDevice(
        api,
        `function handle(args: Arguments, exec: Exec) {
        const until = Date.now() + 400; while (Date.now() < until) {}
        return { statusCode: 200, body: { ok: true } };
      }`,
      );
      const answer = await pskHttpRequest({ port: httpsPort, identity: device.identity, key: device.key, path: '/slow', body: '{}' });
      expect(answer?.status).toBe(202);
      expect(JSON.parse(answer!.body)).toMatchObject({ status: 'accepted' });
      let n = 0;
      for (let i = 0; i < 50 && n === 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        n = (
          await db.query<{ n: number }>('SELECT count(*)::int AS n FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1', [
            device.hashId,
          ])
        ).rows[0].n;
      }
      expect(n).toBe(1);
    } finally {
      child.kill('SIGTERM');
      await exited;
      await db.close();
    }
  }, 60_000);

  it('spawns a private redis-server when none answers at REDIS_URL, and stops it on SIGTERM', async () => {
    const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-redis-'));
    const port = await freePort();
    const { child, exited } = await startProcess({ DATABASE_URL: process.env.DATABASE_URL!, DATA_DIR, REDIS_URL: `redis://127.0.0.1:${port}` });
    const ping = spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' });
    expect(ping.stdout.trim()).toBe('PONG');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    let after = 'PONG';
    for (let i = 0; i < 50 && after === 'PONG'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout.trim();
    }
    expect(after).not.toBe('PONG');
  }, 60_000);

  it('exits with one clear sentence when no Redis answers and none can be started', async () => {
    const port = await freePort();
    const out = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN], {
      env: {
        PATH: path.dirname(process.execPath),
        REDIS_URL: `redis://127.0.0.1:${port}`,
        DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'gridgate-noredis-')),
        LOG_LEVEL: 'silent',
      },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(out.status).toBe(1);
    expect(out.stderr.trim()).toBe(
      `No Redis answers at redis://127.0.0.1:${port}. Start one (e.g. "apt-get install redis-server && redis-server --daemonize yes") or set REDIS_URL to a Redis that runs.`,
    );
  }, 60_000);

  it('a start that fails on a taken port stops the embedded PostgreSQL it had started', async () => {
    const DATA_DIR = mkdtempSync(path.join(os.tmpdir(), 'gridgate-taken-'));
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '0.0.0.0', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const svc = await startServiceProcess({ DATA_DIR, API_PORT: String(port) }, [], { waitHealthy: false });
      expect(await svc.exited).toBe(1);
      // the cluster's postmaster.pid is gone once its server has stopped
      await until(
        async () => existsSync(path.join(DATA_DIR, 'postgres', 'postmaster.pid')),
        (running) => !running,
        'the embedded PostgreSQL stopped',
      );
    } finally {
      taken.close();
    }
  }, 120_000);

  it('the admin CLI answers a call it cannot run with what is wrong and its usage', () => {
    const run = (...args: string[]) =>
      spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'admin', ...args], {
        env: { PATH: process.env.PATH, SECRET_KEY: '33'.repeat(32) },
        encoding: 'utf8',
        timeout: 60_000,
      });
    // what npm leaves of `npm run admin create-environment --type connectivity --name x` (no --)
    const stray = run('create-environment', 'connectivity', 'x');
    expect(stray.status).toBe(2);
    expect(stray.stderr).toContain("Unexpected argument 'connectivity'");
    expect(stray.stderr).toContain('npm run admin -- <command>');
    const missing = run('create-machine-account', '--rights', 'READ');
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('create-machine-account needs --environment');
    expect(run('create-environment', '--type', 'both', '--name', 'x').stderr).toContain('--type must be monitoring or connectivity');
    expect(run('frobnicate').stderr).toContain('unknown command "frobnicate"');
    const help = run('--help');
    expect(help.status).toBe(0);
    expect(help.stderr).toContain('create-environment --type monitoring|connectivity');
    // five processes started one after the other, each about 3.5 s on a quiet machine
  }, 120_000);
});
