import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openDb, recreateDatabase } from '../src/app/db.ts';
import { embeddedPostgres } from '../src/app/embedded-postgres.ts';
// @ts-expect-error a plain JavaScript module of the scripts (no declaration file)
import { buildConsole } from '../scripts/build-console.mjs';

const DEFAULT_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** Whether anything accepts TCP connections at the URL's host and port. */
function listening(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || 5432), timeout: 2000 });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

/**
 * A fresh test database per run, named after the run (TEST_DATABASE_NAME, else gridgate_test_<pid>) and dropped when
 * it ends, so two runs on one machine never drop each other's; every test file then makes its own environments. The server is
 * TEST_ADMIN_DATABASE_URL's, else the one at 127.0.0.1:5432, else (none answers there, or
 * TEST_POSTGRES=embedded) an embedded PostgreSQL of the tests' own, started here and stopped after the run.
 */
/** Drops database `name` and those the test files named after it (`<name>_partitions`, ...). */
async function dropDatabases(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname = $1 OR starts_with(datname, $1 || '_')", [name]);
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(datname)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

export default async function setup(): Promise<() => Promise<void>> {
  // the console the browser tests drive (test/console/), built once per run when a source changed
  buildConsole({ quiet: true });
  let admin = process.env.TEST_ADMIN_DATABASE_URL ?? DEFAULT_ADMIN_URL;
  let teardown = async (): Promise<void> => undefined;
  const name = process.env.TEST_DATABASE_NAME ?? `gridgate_test_${process.pid}`;
  const keep = process.env.TEST_DATABASE_NAME !== undefined;
  // the test files read the name (databases of their own are named after it)
  process.env.TEST_DATABASE_NAME = name;
  if (process.env.TEST_POSTGRES === 'embedded' || (!process.env.TEST_ADMIN_DATABASE_URL && !(await listening(DEFAULT_ADMIN_URL)))) {
    // one cluster per test database name, kept between runs (initdb once)
    const server = await embeddedPostgres(path.join(os.tmpdir(), `${name}-postgres`));
    console.log(`test global setup: no PostgreSQL at 127.0.0.1:5432 (or TEST_POSTGRES=embedded): using an embedded one at ${new URL(server.url).host}`);
    admin = server.url;
    teardown = () => server.release();
  }
  process.env.TEST_ADMIN_DATABASE_URL = admin;
  process.env.DATABASE_URL = await recreateDatabase(admin, name);
  const db = await openDb({ databaseUrl: process.env.DATABASE_URL, dataDir: '/tmp' });
  await db.close();
  const stop = teardown;
  return async () => {
    if (!keep) await dropDatabases(admin, name);
    await stop();
  };
}
