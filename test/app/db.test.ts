import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../../src/app/db.ts';

// The service's database connections: settings every connection carries.

let db: Db;
beforeAll(async () => {
  db = await openDb({ databaseUrl: process.env.DATABASE_URL!, dataDir: '/tmp', migrate: false });
});
afterAll(async () => {
  await db.close();
});

describe('database connections', () => {
  it('run without JIT (its compile time exceeds the short statements), the deferred pool also without a synchronous commit', async () => {
    expect((await db.query<{ jit: string }>('SHOW jit')).rows[0].jit).toBe('off');
    expect((await db.deferred.query<{ jit: string }>('SHOW jit')).rows[0].jit).toBe('off');
    expect((await db.deferred.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('off');
  });
});
