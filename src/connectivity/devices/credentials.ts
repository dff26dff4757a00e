import type { AppContext } from '../../app/context.ts';
import { decryptSecret } from '../../app/keys.ts';
import type { Redis } from '../../app/redis.ts';

/** What the gateway knows of a device once its PSK identity is resolved. */
export interface PskCredential {
  deviceHashId: string;
  environmentHashId: string;
  key: Buffer;
  /** its device type was deleted: the device may still authenticate, but every request is refused */
  refused: boolean;
}

interface Cached {
  d: string;
  e: string;
  s: string;
  r?: 1;
}

const POSITIVE_TTL_S = 300;
const NEGATIVE_TTL_S = 5;
// per deployment (QUEUE_NAME): two deployments on one Redis each have their own device of an identity
const cacheKey = (config: { queueName: string }, identity: string) => `${config.queueName}:psk:${identity}`;

/** The AAD that binds a sealed key to its identity, so a sealed key moved to another row does not open. */
export const pskAad = (identity: string) => `psk:${identity}`;

/**
 * Looks a PSK identity up: Redis first (the key stays sealed there), PostgreSQL on a miss.
 * Unknown identities are cached briefly too, so a scanning client cannot hammer the database.
 * A device whose type was deleted is unknown unless `includeRefused` (a listener that answers it
 * with a clear 403 / 4.03 after the handshake asks for it).
 */
export async function lookupPskCredential(ctx: AppContext, identity: string, opts: { includeRefused?: boolean } = {}): Promise<PskCredential | null> {
  const cached = await ctx.redis.get(cacheKey(ctx.config, identity));
  let entry: Cached | null;
  if (cached !== null) {
    entry = cached === '' ? null : (JSON.parse(cached) as Cached);
  } else {
    // a device whose type was deleted still completes the handshake, so it gets a clear 403 rather than an alert
    const { rows } = await ctx.db.query<{ hash_id: string; env_hash_id: string; psk_sealed: Buffer; type_deleted: boolean }>(
      `SELECT d.hash_id, e.hash_id AS env_hash_id, d.psk_sealed, t.deleted_at IS NOT NULL AS type_deleted
         FROM device d JOIN environment e ON e.id = d.environment_id JOIN device_type t ON t.id = d.device_type_id
        WHERE d.psk_identity = $1 AND e.deleted_at IS NULL`,
      [identity],
    );
    entry =
      rows.length === 0
        ? null
        : { d: rows[0].hash_id, e: rows[0].env_hash_id, s: rows[0].psk_sealed.toString('base64'), ...(rows[0].type_deleted ? { r: 1 as const } : {}) };
    await ctx.redis.set(cacheKey(ctx.config, identity), entry ? JSON.stringify(entry) : '', 'EX', entry ? POSITIVE_TTL_S : NEGATIVE_TTL_S);
  }
  if (!entry || (entry.r === 1 && !opts.includeRefused)) return null;
  return {
    deviceHashId: entry.d,
    environmentHashId: entry.e,
    refused: entry.r === 1,
    key: decryptSecret(ctx.keys.pskEncryption, Buffer.from(entry.s, 'base64'), pskAad(identity)),
  };
}

/**
 * A `credentials` change (src/app/changes.ts) made in this process: a device (or its type, or its environment) was
 * deleted or re-keyed, or provisioned after it knocked. The cache is in Redis, shared by every process, so the
 * process that made the change drops the entries before it answers (wired by the composition root).
 */
export async function forgetCredentials(ctx: { redis: Redis; config: { queueName: string } }, identities: string[]): Promise<void> {
  const keys = identities.map((i) => cacheKey(ctx.config, i));
  // one key per command: on a Redis Cluster the identities' keys live in different slots
  await Promise.all(keys.map((key) => ctx.redis.del(key)));
}
