import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { asAuthor } from '../../src/app/author.ts';
import { newHashId } from '../../src/app/hash-id.ts';

// The audit trail over the REST interface: every change an account makes is logged with its author, in the
// change's own transaction; find-log searches it by object, within the caller's environment only.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface LogRow {
  log: {
    hashId: string;
    userHashId: string | null;
    objectType: string | null;
    objectHashId: string | null;
    subObjectType: null;
    subObjectHashId: null;
    action: string;
    diff: { old: Record<string, unknown> | null; new: Record<string, unknown> | null } | null;
    createdAt: string;
  };
  userName: string | null;
}
const RIGHTS = ['READ', 'ISSUES', 'AUDIT_TRAIL'];
const WEBHOOK_IDENTIFIER = 'function handle(args: { request: WebRequest }) { return { deviceTypeHashId: "x", deviceIdentifier: "y" }; }';

async function addLabel(c: ApiClient, name: string): Promise<string> {
  const r = await c.request<{ hashId: string }>('POST', '/label/', { name, color: '#ff0000' });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.hashId;
}
const logOf = (c: ApiClient, query = '') => findAll<LogRow>(c, `/settings/log${query}`);
const accountOf = async (c: ApiClient) =>
  (
    await api.ctx.db.query<{ hash_id: string; name: string }>(
      'SELECT a.hash_id, a.name FROM machine_account a JOIN environment e ON e.id = a.environment_id WHERE e.hash_id = $1',
      [c.environmentHashId],
    )
  ).rows[0];

describe('audit trail', () => {
  it('a change shows in the log with its author, what changed and the object, newest first', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const author = await accountOf(c);
    const hashId = await addLabel(c, 'Rust');
    expect((await c.request('POST', `/label/${hashId}`, { color: '#00ff00' })).status).toBe(204);
    expect((await c.request('DELETE', `/label/${hashId}`)).status).toBe(204);
    const rows = await logOf(c, `?objectType=label&objectHashId=${hashId}`);
    expect(rows.map((r) => r.log.action)).toEqual(['delete', 'update', 'create']);
    for (const r of rows) {
      expect(r.userName).toBe(author.name);
      expect(r.log).toMatchObject({ userHashId: author.hash_id, objectType: 'label', objectHashId: hashId, subObjectType: null, subObjectHashId: null });
    }
    const [deleted, updated, created] = rows.map((r) => r.log.diff);
    expect(created?.old).toBeNull();
    expect(created?.new).toMatchObject({ hash_id: hashId, name: 'Rust', color: '#ff0000' });
    expect(Object.keys(created?.new ?? {})).not.toContain('id');
    expect(Object.keys(created?.new ?? {})).not.toContain('environment_id');
    expect(updated).toEqual({ old: { color: '#ff0000' }, new: { color: '#00ff00' } });
    expect(deleted?.old).toEqual({ deleted_at: null });
    expect(deleted?.new?.deleted_at).toEqual(expect.any(String));
  });

  it('a change whose transaction rolls back leaves no log row', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const author = await accountOf(c);
    const { db } = api.ctx;
    const env = (await db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId])).rows[0].id;
    const kept = newHashId();
    const rolledBack = newHashId();
    await asAuthor({ environmentId: env, userHashId: author.hash_id }, async () => {
      await db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [kept, env, 'kept', '#000000']);
      await expect(
        db.tx(async (tx) => {
          await tx.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [rolledBack, env, 'gone', '#000000']);
          throw new Error('the change fails after its write');
        }),
      ).rejects.toThrow('the change fails');
    });
    // the next writes outside an operation, on the connections the author's writes used, are not the author's
    await db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [newHashId(), env, 'by a worker', '#000000']);
    await db.tx((tx) =>
      tx.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [newHashId(), env, 'by a worker', '#000000']),
    );
    expect((await logOf(c)).map((r) => r.log.objectHashId)).toEqual([kept]);
    expect((await db.query('SELECT 1 FROM label WHERE hash_id = $1', [rolledBack])).rows).toEqual([]);
  });

  it('a log row whose random hashId repeats an earlier one does not fail the change it logs', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const author = await accountOf(c);
    const { db } = api.ctx;
    const env = (await db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId])).rows[0].id;
    const rollback = new Error('rolled back: the repeated hashId stays in this transaction');
    await expect(
      asAuthor({ environmentId: env, userHashId: author.hash_id }, () =>
        db.tx(async (tx) => {
          // every log row of this transaction gets the same hashId, as two random ones could
          await tx.query("ALTER TABLE audit_log ALTER COLUMN hash_id SET DEFAULT 'repeated'");
          for (const name of ['one', 'two'])
            await tx.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [newHashId(), env, name, '#000000']);
          const { rows } = await tx.query('SELECT hash_id FROM audit_log WHERE environment_id = $1', [env]);
          expect(rows).toEqual([{ hash_id: 'repeated' }, { hash_id: 'repeated' }]);
          throw rollback;
        }),
      ),
    ).rejects.toBe(rollback);
  });

  it('writes made outside an API operation (devices, workers) are not logged, nor are reads', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const env = (await api.ctx.db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId])).rows[0].id;
    await api.ctx.db.query('INSERT INTO label (hash_id, environment_id, name, color) VALUES ($1, $2, $3, $4)', [newHashId(), env, 'by a worker', '#000000']);
    expect((await c.request('GET', '/label/')).status).toBe(200);
    expect(await logOf(c)).toEqual([]);
  });

  it('every table carries the audit trigger, those of later migrations included, but the log, bookkeeping and device data', async () => {
    const { rows } = await api.ctx.db.query<{ relname: string }>(
      `SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
        WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'audit_change') ORDER BY 1`,
    );
    expect(rows.map((r) => r.relname)).toEqual([
      'audit_log',
      'device_counter_hour',
      'measurement',
      'measurement_hourly',
      'schema_migrations',
      'supplier_activity',
      'wal_flush_barrier',
    ]);
  });

  it("credentials never enter the log: a webhook's sealed secret is named, its value redacted", async () => {
    const c = await api.login('connectivity', ['ENVIRONMENT_ADMIN']);
    const add = await c.request<{ hashId: string }>('POST', '/supplier-webhook/', { name: 'The Things Stack', identifier: WEBHOOK_IDENTIFIER });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    const [created] = await logOf(c, `?objectType=supplierWebhook&objectHashId=${add.body.hashId}`);
    expect(created.log.diff?.new).toMatchObject({ name: 'The Things Stack', secret_sealed: '[redacted]' });
  });

  it('the trigger follows the schema: a table renamed, or given a credential column, by a later migration', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const author = await accountOf(c);
    const { db } = api.ctx;
    const env = (await db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId])).rows[0].id;
    const suffix = newHashId(6);
    const [table, renamed] = [`audit_probe_${suffix}`, `audit_renamed_${suffix}`];
    const objectType = (prefix: string) => `audit${prefix}${suffix[0].toUpperCase()}${suffix.slice(1)}`;
    // a table as a later migration makes it
    await db.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, hash_id text NOT NULL, environment_id bigint NOT NULL, name text)`);
    try {
      const write = (sql: string) => asAuthor({ environmentId: env, userHashId: author.hash_id }, () => db.query(sql, [env]));
      await db.query('SELECT audit_attach_all()');
      await write(`INSERT INTO ${table} (hash_id, environment_id, name) VALUES ('probe', $1, 'first')`);
      await db.query(`ALTER TABLE ${table} ADD COLUMN api_token text`);
      await db.query(`ALTER TABLE ${table} RENAME TO ${renamed}`);
      await db.query('SELECT audit_attach_all()');
      await write(`UPDATE ${renamed} SET name = 'second', api_token = 'the secret' WHERE environment_id = $1`);
      // each table's trigger function is its own, named after it: the one of the old name is gone with it
      const functions = await db.query<{ proname: string }>(`SELECT proname FROM pg_proc WHERE proname LIKE 'audit_row_audit_%${suffix}' ORDER BY 1`);
      expect(functions.rows.map((r) => r.proname)).toEqual([`audit_row_${renamed}`]);
      const rows = (await logOf(c, '?objectHashId=probe')).map((r) => r.log);
      expect(rows.map((r) => [r.objectType, r.action, r.diff])).toEqual([
        [objectType('Renamed'), 'update', { old: { name: 'first', api_token: '[redacted]' }, new: { name: 'second', api_token: '[redacted]' } }],
        [objectType('Probe'), 'create', { old: null, new: { hash_id: 'probe', name: 'first' } }],
      ]);
    } finally {
      await db.query(`DROP TABLE IF EXISTS ${table}, ${renamed}`);
    }
  });

  it('an update logs the columns that changed, by their type: json and arrays included, updated_at alone is no change', async () => {
    const c = await api.login('monitoring', RIGHTS);
    const author = await accountOf(c);
    const { db } = api.ctx;
    const env = (await db.query<{ id: number }>('SELECT id FROM environment WHERE hash_id = $1', [c.environmentHashId])).rows[0].id;
    const table = `audit_types_${newHashId(6)}`;
    // json has no equality operator (compared as text); numeric 1.0 and 1.00 are equal values
    await db.query(`CREATE TABLE ${table} (id bigserial PRIMARY KEY, hash_id text NOT NULL, environment_id bigint NOT NULL, doc json,
      tags text[], level numeric, at point, deleted_at timestamptz, updated_at timestamptz NOT NULL DEFAULT now())`);
    try {
      await db.query('SELECT audit_attach_all()');
      const write = (sql: string) => asAuthor({ environmentId: env, userHashId: author.hash_id }, () => db.query(sql, [env]));
      await write(`INSERT INTO ${table} (hash_id, environment_id, doc, tags, level, at) VALUES ('types', $1, '{"a": 1}', '{x}', 1.0, '(1,2)')`);
      await write(`UPDATE ${table} SET updated_at = now() + interval '1 minute', level = 1.00, at = '(1,2)' WHERE environment_id = $1`);
      await write(`UPDATE ${table} SET doc = '{"a": 2}', tags = '{x,y}' WHERE environment_id = $1`);
      await write(`UPDATE ${table} SET deleted_at = '2026-01-01T00:00:00Z' WHERE environment_id = $1`);
      const rows = (await logOf(c, '?objectHashId=types')).map((r) => [r.log.action, r.log.diff]);
      expect(rows).toEqual([
        ['delete', { old: { deleted_at: null }, new: { deleted_at: '2026-01-01T00:00:00+00:00' } }],
        ['update', { old: { doc: { a: 1 }, tags: ['x'] }, new: { doc: { a: 2 }, tags: ['x', 'y'] } }],
        [
          'create',
          { old: null, new: { hash_id: 'types', doc: { a: 1 }, tags: ['x'], level: 1.0, at: '(1,2)', deleted_at: null, updated_at: expect.any(String) } },
        ],
      ]);
    } finally {
      await db.query(`DROP TABLE IF EXISTS ${table}`);
    }
  });

  it('find-log needs AUDIT_TRAIL in a monitoring environment and ENVIRONMENT_ADMIN for a supplier', async () => {
    const without = await api.login('monitoring', ['READ', 'ISSUES']);
    const r = await without.request<ErrorBody>('GET', '/settings/log');
    expect(r.status).toBe(403);
    expect(r.body.key).toBe('right_error');
    const supplier = await api.login('connectivity', ['ENVIRONMENT_ADMIN']);
    expect((await supplier.request('GET', '/settings/log')).status).toBe(200);
  });

  it("an environment sees only its own log: another's object is not found in it", async () => {
    const a = await api.login('monitoring', RIGHTS);
    const b = await api.login('monitoring', RIGHTS);
    const hashId = await addLabel(a, 'A only');
    expect(await logOf(b, `?objectHashId=${hashId}`)).toEqual([]);
    expect(await logOf(b)).toEqual([]);
    expect((await logOf(a, `?objectHashId=${hashId}`)).length).toBe(1);
    // b cannot change a's label, and its refused attempt logs nothing
    expect((await b.request('POST', `/label/${hashId}`, { name: 'B was here' })).status).toBe(404);
    expect((await logOf(a, `?objectHashId=${hashId}`)).length).toBe(1);
  });

  it('limits are parameter errors naming the field', async () => {
    const c = await api.login('monitoring', RIGHTS);
    expectParameterError(await c.request('GET', '/settings/log?rowsPerPage=101'), 'rowsPerPage');
    expectParameterError(await c.request('GET', '/settings/log?sortBy=createdAt'), 'sortBy');
    expectParameterError(await c.request('GET', `/settings/log?objectHashId=${'x'.repeat(65)}`), 'objectHashId');
  });
});
