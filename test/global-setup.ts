import pg from 'pg';
import { openDb } from '../src/app/db.ts';

/** A fresh test database per run; every test file then makes its own environments. */
export default async function setup(): Promise<void> {
  const admin = process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = process.env.TEST_DATABASE_NAME ?? 'gridgate_test';
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${name}`;
  process.env.DATABASE_URL = url.toString();
  const db = await openDb({ databaseUrl: process.env.DATABASE_URL, dataDir: '/tmp' });
  await db.close();
}
