import { timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../../app/context.ts';
import type { Queryable } from '../../app/db.ts';
import { NotFoundError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId, newSecret } from '../../app/hash-id.ts';
import { decryptSecret, encryptSecret } from '../../app/keys.ts';
import { compileOnSave } from '../user-code.ts';

/** The SDK's SupplierWebhook. */
export interface SupplierWebhook {
  hashId: string;
  name: string;
  createdAt: string;
}

export interface WebhookInput {
  name: string;
  identifier: string;
}
export type WebhookPatch = Partial<WebhookInput>;

type Ctx = Pick<AppContext, 'db' | 'keys' | 'config'>;

/** 32 random bytes (256 bits), base64url: the part of the URL that authenticates the sender. */
const SECRET_BYTES = 32;

// the sealed secret is bound to its webhook, so a sealed value copied to another row does not open;
// the key is the server's at-rest key (the one device PSKs are sealed with), the AAD keeps the uses apart
const secretAad = (hashId: string) => `webhook-secret:${hashId}`;

export const sealWebhookSecret = (ctx: Pick<AppContext, 'keys'>, hashId: string, secret: string) =>
  encryptSecret(ctx.keys.pskEncryption, Buffer.from(secret, 'utf8'), secretAad(hashId));
export const openWebhookSecret = (ctx: Pick<AppContext, 'keys'>, hashId: string, sealed: Buffer) =>
  decryptSecret(ctx.keys.pskEncryption, sealed, secretAad(hashId)).toString('utf8');

/** Constant-time comparison of a presented secret with the stored one (lengths are not secret). */
export function secretMatches(presented: string, expected: string): boolean {
  const a = Buffer.from(presented, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The URL a third party posts to (API-NOTES: webhook URL). */
export const webhookUrl = (ctx: Pick<AppContext, 'config'>, hashId: string, secret: string) =>
  `https://${ctx.config.publicHost}:${ctx.config.httpsDevicePort}/webhook/${hashId}/${secret}`;

const SELECT = 'w.id, w.hash_id, w.name, w.created_at, w.secret_sealed';

function toRow(ctx: Ctx, r: Record<string, unknown>): { webhook: SupplierWebhook; url: string } {
  const hashId = r.hash_id as string;
  return {
    webhook: { hashId, name: r.name as string, createdAt: (r.created_at as Date).toISOString() },
    url: webhookUrl(ctx, hashId, openWebhookSecret(ctx, hashId, r.secret_sealed as Buffer)),
  };
}

export async function addWebhook(ctx: Ctx, environmentId: number, input: WebhookInput): Promise<{ hashId: string; url: string }> {
  const identifierHash = await compileOnSave(ctx.config.supplierCode, 'identifier', input.identifier, environmentId);
  const hashId = newHashId();
  const secret = newSecret(SECRET_BYTES);
  await ctx.db.query(
    `INSERT INTO supplier_webhook (hash_id, environment_id, name, identifier, identifier_hash, secret_sealed)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [hashId, environmentId, input.name, input.identifier, identifierHash, sealWebhookSecret(ctx, hashId, secret)],
  );
  return { hashId, url: webhookUrl(ctx, hashId, secret) };
}

async function load(db: Queryable, environmentId: number, hashId: string, forUpdate = false) {
  const { rows } = await db.query(
    `SELECT ${SELECT}, w.identifier FROM supplier_webhook w WHERE w.environment_id = $1 AND w.hash_id = $2 AND w.deleted_at IS NULL${forUpdate ? ' FOR UPDATE' : ''}`,
    [environmentId, hashId],
  );
  if (rows.length === 0) throw new NotFoundError('webhook', hashId);
  return rows[0];
}

export async function getWebhook(ctx: Ctx, environmentId: number, hashId: string) {
  const r = await load(ctx.db, environmentId, hashId);
  const { webhook, url } = toRow(ctx, r);
  return { webhook, identifier: r.identifier as string, url };
}

export async function findWebhooks(ctx: Ctx, environmentId: number, query: FindQuery) {
  const page = await findPage(
    ctx.db,
    {
      from: 'supplier_webhook w',
      select: SELECT,
      idColumn: 'w.id',
      where: ['w.environment_id = $1', 'w.deleted_at IS NULL'],
      params: [environmentId],
      sortable: { hashId: 'w.hash_id', name: 'w.name' },
      search: ['w.name', 'w.hash_id'],
      updatedColumn: 'w.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => toRow(ctx, r)) };
}

export async function updateWebhook(ctx: Ctx, environmentId: number, hashId: string, patch: WebhookPatch): Promise<void> {
  const identifierHash = patch.identifier === undefined ? null : await compileOnSave(ctx.config.supplierCode, 'identifier', patch.identifier, environmentId);
  const { rowCount } = await ctx.db.query(
    `UPDATE supplier_webhook SET name = COALESCE($3, name), identifier = COALESCE($4, identifier),
       identifier_hash = COALESCE($5, identifier_hash), updated_at = now()
     WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`,
    [environmentId, hashId, patch.name ?? null, patch.identifier ?? null, identifierHash],
  );
  if (rowCount === 0) throw new NotFoundError('webhook', hashId);
}

/** Soft delete: the URL stops working at once (gateways cache a webhook for a bounded time, see src/gateway/webhook.ts). */
export async function deleteWebhook(ctx: Ctx, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await ctx.db.query(
    'UPDATE supplier_webhook SET deleted_at = now(), updated_at = now() WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL',
    [environmentId, hashId],
  );
  if (rowCount === 0) throw new NotFoundError('webhook', hashId);
}

/** What the gateway needs to serve a webhook URL: its environment, code and sealed secret. */
export interface WebhookTarget {
  hashId: string;
  environmentId: number;
  environmentHashId: string;
  identifier: string;
  secretSealed: Buffer;
}

/** A live webhook of a live connectivity environment, by hashId alone (the URL names no environment). */
export async function loadWebhookTarget(db: Queryable, hashId: string): Promise<WebhookTarget | null> {
  const { rows } = await db.query(
    `SELECT w.hash_id, w.environment_id, e.hash_id AS env_hash_id, w.identifier, w.secret_sealed
       FROM supplier_webhook w JOIN environment e ON e.id = w.environment_id
      WHERE w.hash_id = $1 AND w.deleted_at IS NULL AND e.deleted_at IS NULL AND e.type = 'connectivity'`,
    [hashId],
  );
  if (rows.length === 0) return null;
  const r = rows[0];
  return {
    hashId: r.hash_id as string,
    environmentId: r.environment_id as number,
    environmentHashId: r.env_hash_id as string,
    identifier: r.identifier as string,
    secretSealed: r.secret_sealed as Buffer,
  };
}
