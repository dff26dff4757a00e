import { openDb, recreateDatabase } from '../src/app/db.ts';

/** A fresh test database per run; every test file then makes its own environments. */
export default async function setup(): Promise<void> {
  const admin = process.env.TEST_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  process.env.DATABASE_URL = await recreateDatabase(admin, process.env.TEST_DATABASE_NAME ?? 'gridgate_test');
  const db = await openDb({ databaseUrl: process.env.DATABASE_URL, dataDir: '/tmp' });
  await db.close();
}
