import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb, type Queryable } from '../src/app/db.ts';
import { embeddedUrl } from '../src/app/embedded-postgres.ts';
import { connectivityClient, pskDevice } from './support/provision.ts';
import { pskHttpRequest } from './support/psk-client.ts';
import { admin, killServiceProcesses, startProcess } from './support/service-process.ts';
import { until } from './support/until.ts';

// The embedded default (DATABASE_URL unset): the service runs its own PostgreSQL in DATA_DIR/postgres.
const dataDirs: string[] = [];
function newDataDir(name: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), `gridgate-${name}-`));
  dataDirs.push(dir);
  return dir;
}
afterAll(async () => {
  killServiceProcesses();
  // a server whose service was killed by a failed test stays up (the next start would adopt it): stop it, drop its files
  for (const dir of dataDirs) {
    const pid = serverPid(dir);
    if (pid !== null) {
      process.kill(pid, 'SIGINT');
      await gone(pid);
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

const HANDLER = `function handle(args: Arguments, exec: Exec) {
  exec.addLog('seen');
  return { statusCode: 200, body: { n: args.scheduledCommands.length } };
}`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** pid of the embedded PostgreSQL server of `dataDir`, or null when none runs there. */
function serverPid(dataDir: string): number | null {
  const file = path.join(dataDir, 'postgres/postmaster.pid');
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 200; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return true;
    }
    await sleep(50);
  }
  return false;
}

/** Activities stored for the device (one per handled report). */
async function activities(db: Queryable, deviceHashId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM supplier_activity a JOIN device d ON d.id = a.device_id WHERE d.hash_id = $1 AND NOT a.failed',
    [deviceHashId],
  );
  return rows[0].n;
}

describe('the embedded default', () => {
  it('answers a device report after every pooled connection of the service idled out and closed', async () => {
    const DATA_DIR = newDataDir('idle');
    const { child, base, httpsPort, exited } = await startProcess({ DATA_DIR, DATABASE_IDLE_TIMEOUT_MS: '200' });
    // attached to the service's database, as the admin CLI is
    const db = await openDb({ databaseUrl: null, dataDir: DATA_DIR, migrate: false });
    const watcher = new pg.Client({ connectionString: embeddedUrl(DATA_DIR) as string });
    await watcher.connect();
    try {
      const api = await connectivityClient(db, base);
      const device = await pskDevice(api, HANDLER);
      const report = () => pskHttpRequest({ port: httpsPort, identity: device.identity, key: device.key, path: '/report', body: '{}' });
      expect((await report())?.status).toBe(200);
      await db.close();
      // the real mechanism: wait until the server has no client session but the watcher's (the service's pools
      // closed theirs after 200 ms idle), then report again on connections the pools open anew
      let others = -1;
      for (let i = 0; i < 200 && others !== 0; i++) {
        await sleep(50);
        others = (
          await watcher.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
          )
        ).rows[0].n;
      }
      expect(others).toBe(0);
      for (let i = 0; i < 3; i++) {
        const answer = await report();
        expect(answer?.status, answer?.body).toBe(200);
        expect(JSON.parse(answer!.body)).toEqual({ n: 0 });
      }
      expect(await activities(watcher as unknown as Queryable, device.hashId)).toBe(4);
    } finally {
      await watcher.end();
      child.kill('SIGTERM');
      await exited;
    }
  }, 120_000);

  it('starts its database server again when it dies under the running service (SIGKILL), and keeps answering', async () => {
    const DATA_DIR = newDataDir('crash');
    const { child, base, httpsPort, exited } = await startProcess({ DATA_DIR });
    let db = await openDb({ databaseUrl: null, dataDir: DATA_DIR, migrate: false });
    try {
      const api = await connectivityClient(db, base);
      const device = await pskDevice(api, HANDLER);
      await db.close();
      const report = () => pskHttpRequest({ port: httpsPort, identity: device.identity, key: device.key, path: '/report', body: '{}' });
      expect((await report())?.status).toBe(200);
      const first = serverPid(DATA_DIR)!;
      process.kill(first, 'SIGKILL');
      let next: number | null = null;
      for (let i = 0; i < 600 && (next === null || next === first || embeddedUrl(DATA_DIR) === null); i++) {
        await sleep(100);
        next = serverPid(DATA_DIR);
      }
      expect(next).not.toBe(first);
      expect(next).not.toBeNull();
      const answer = await report();
      expect(answer?.status, answer?.body).toBe(200);
      db = await openDb({ databaseUrl: null, dataDir: DATA_DIR, migrate: false });
      // The answer waits for the commit, the job for the WAL flush (docs/decisions.md, "The device's answer waits for the commit,
      // the job waits for the disk"). The SIGKILL can land between the first report's commit and that flush: then its
      // job is still queued and runs again once the server is back, a moment after the second report is answered.
      // Both must be there, each once (a lost first report leaves 1 here until the timeout).
      const stored = await until(
        () => activities(db, device.hashId),
        (n) => n >= 2,
        'both reports stored',
        20_000,
      );
      expect(stored).toBe(2);
    } finally {
      await db.close();
      child.kill('SIGTERM');
      await exited;
    }
  }, 120_000);

  it('keeps the server running while any process of the DATA_DIR uses it: whoever remains starts it again', async () => {
    const DATA_DIR = newDataDir('handover');
    let svc = await startProcess({ DATA_DIR });
    // this process attaches, as the admin CLI or a second role does
    const db = await openDb({ databaseUrl: null, dataDir: DATA_DIR, migrate: false });
    const api = await connectivityClient(db, svc.base);
    const device = await pskDevice(api, HANDLER);
    const byService = serverPid(DATA_DIR);
    svc.child.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    expect(await gone(byService!)).toBe(true);
    // this process starts it again (its pool reconnects) ...
    let n: number | null = null;
    for (let i = 0; i < 100 && n === null; i++) {
      await sleep(100);
      n = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM device WHERE hash_id = $1', [device.hashId]).then(
        (r) => r.rows[0].n,
        () => null,
      );
    }
    expect(n).toBe(1);
    const byTest = serverPid(DATA_DIR);
    expect(byTest).not.toBeNull();
    // ... the service started again uses it, and takes it over when this process lets it go
    svc = await startProcess({ DATA_DIR });
    await db.close();
    expect(await gone(byTest!)).toBe(true);
    let answer = null;
    for (let i = 0; i < 20 && answer?.status !== 200; i++) {
      await sleep(500);
      answer = await pskHttpRequest({ port: svc.httpsPort, identity: device.identity, key: device.key, path: '/report', body: '{}' });
    }
    expect(answer?.status).toBe(200);
    expect(serverPid(DATA_DIR)).not.toBeNull();
    svc.child.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    expect(serverPid(DATA_DIR)).toBeNull();
  }, 180_000);

  it('keeps its data over restarts (SIGTERM, and SIGKILL of the service); the admin CLI works with or without the service running', async () => {
    const DATA_DIR = newDataDir('restart');
    let svc = await startProcess({ DATA_DIR });
    const env = admin({ DATA_DIR }, 'create-environment', '--type', 'connectivity', '--name', 'Restarts');
    const account = admin({ DATA_DIR }, 'create-machine-account', '--environment', env.hashId, '--rights', 'ENVIRONMENT_ADMIN');
    let db = await openDb({ databaseUrl: null, dataDir: DATA_DIR, migrate: false });
    const api = await connectivityClient(db, svc.base);
    const device = await pskDevice(api, HANDLER);
    const report = (port: number) => pskHttpRequest({ port, identity: device.identity, key: device.key, path: '/report', body: '{}' });
    expect((await report(svc.httpsPort))?.status).toBe(200);
    await db.close();
    const firstServer = serverPid(DATA_DIR);
    expect(firstServer).not.toBeNull();

    // a clean stop stops the database server too
    svc.child.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    expect(await gone(firstServer!)).toBe(true);

    // the admin CLI on its own: starts the server, does its work, stops it
    const second = admin({ DATA_DIR }, 'create-environment', '--type', 'monitoring', '--name', 'While stopped');
    expect(second).toMatchObject({ type: 'monitoring', name: 'While stopped' });
    expect(serverPid(DATA_DIR)).toBeNull();

    // started again: what it had is there (the machine account logs in, the device reports)
    svc = await startProcess({ DATA_DIR });
    const login = async (base: string) =>
      (
        await fetch(`${base}/authentication/machine-login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'api-version': '5' },
          body: JSON.stringify({ assertion: account.assertion }),
        })
      ).status;
    expect(await login(svc.base)).toBe(200);
    expect((await report(svc.httpsPort))?.status).toBe(200);

    // killed outright: its database server is left running; the next start adopts it and stops it on SIGTERM
    const orphan = serverPid(DATA_DIR);
    svc.child.kill('SIGKILL');
    await svc.exited;
    expect(serverPid(DATA_DIR)).toBe(orphan);
    svc = await startProcess({ DATA_DIR });
    expect(await login(svc.base)).toBe(200);
    expect((await report(svc.httpsPort))?.status).toBe(200);
    db = await openDb({ databaseUrl: null, dataDir: DATA_DIR, migrate: false });
    try {
      expect(await activities(db, device.hashId)).toBe(3);
      const { rows } = await db.query<{ hash_id: string }>('SELECT hash_id FROM environment WHERE hash_id = ANY($1) ORDER BY hash_id', [
        [env.hashId, second.hashId],
      ]);
      expect(rows.map((r) => r.hash_id)).toEqual([env.hashId, second.hashId].sort());
    } finally {
      await db.close();
    }
    svc.child.kill('SIGTERM');
    expect(await svc.exited).toBe(0);
    expect(await gone(orphan!)).toBe(true);
  }, 240_000);
});
