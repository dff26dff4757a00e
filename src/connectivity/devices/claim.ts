import { createHash, randomBytes } from 'node:crypto';
import type { Db, Queryable } from '../../app/db.ts';
import { ConflictError, NotFoundError, ParameterError } from '../../app/errors.ts';

/** 192 random bits, URL-safe: what a customer types or scans to claim a device. */
const TOKEN_BYTES = 24;

const sha256 = (token: string) => createHash('sha256').update(token, 'utf8').digest();

export interface ClaimToken {
  deviceHashId: string;
  claimToken: string;
}

/**
 * getClaimToken: a new token for each device, replacing any older one. A supplier gets none for a
 * device a monitoring environment has claimed; a customer only for devices it claimed, and `check`
 * (run under the devices' row locks) refuses linked ones. All or nothing; only the SHA-256 is stored.
 */
export async function createClaimTokens(
  db: Db,
  environmentId: number,
  deviceHashIds: string[],
  holder: 'supplier' | 'customer' = 'supplier',
  check?: (client: Queryable, deviceIds: number[]) => Promise<void>,
): Promise<ClaimToken[]> {
  // one token per device even when a hashId is repeated: a second one would invalidate the first
  const wanted = [...new Set(deviceHashIds)];
  return db.tx(async (client) => {
    // a customer asks for the devices it claimed (`check` refuses linked ones), a supplier for its own
    const { rows } = await client.query<{ id: number; hash_id: string; claimed: boolean }>(
      `SELECT id, hash_id, claimed_environment_id IS NOT NULL AS claimed FROM device
        WHERE ${holder === 'supplier' ? 'environment_id' : 'claimed_environment_id'} = $1 AND hash_id = ANY($2) FOR UPDATE`,
      [environmentId, wanted],
    );
    const byHashId = new Map(rows.map((r) => [r.hash_id, r]));
    const missing = wanted.filter((h) => !byHashId.has(h));
    if (missing.length > 0) throw new NotFoundError(missing.length === 1 ? 'device' : 'devices', missing.join(', '));
    if (check)
      await check(
        client,
        rows.map((r) => r.id),
      );
    const claimed = holder === 'supplier' ? wanted.filter((h) => byHashId.get(h)!.claimed) : [];
    if (claimed.length > 0) {
      throw new ConflictError(
        `device ${claimed.join(', ')} is claimed by a monitoring environment; a claim token is only given for a device the supplier holds`,
      );
    }
    const tokens = wanted.map((deviceHashId) => ({ deviceHashId, claimToken: randomBytes(TOKEN_BYTES).toString('base64url') }));
    await client.query(
      `INSERT INTO device_claim_token (device_id, token_sha256, environment_id)
       SELECT v.device_id, v.token_sha256, $3 FROM unnest($1::bigint[], $2::bytea[]) AS v(device_id, token_sha256)
       ON CONFLICT (device_id) DO UPDATE SET token_sha256 = EXCLUDED.token_sha256, environment_id = EXCLUDED.environment_id, created_at = now()`,
      [tokens.map((t) => byHashId.get(t.deviceHashId)!.id), tokens.map((t) => sha256(t.claimToken)), environmentId],
    );
    return tokens;
  });
}

/**
 * claim (the monitoring side, whose route arrives with a later issue): moves the devices of
 * `claimTokens` into the monitoring environment and invalidates the tokens. Every token must be
 * valid, or nothing is claimed. Returns the claimed devices' hashIds in token order.
 */
export async function claimDevices(db: Db, monitoringEnvironmentId: number, claimTokens: string[]): Promise<string[]> {
  return db.tx(async (client) => {
    const hashes = claimTokens.map(sha256);
    const { rows } = await client.query<{ device_id: number; hash_id: string; token_sha256: Buffer }>(
      `SELECT t.device_id, d.hash_id, t.token_sha256 FROM device_claim_token t JOIN device d ON d.id = t.device_id
        WHERE t.token_sha256 = ANY($1) FOR UPDATE OF d, t`,
      [hashes],
    );
    const byToken = new Map(rows.map((r) => [r.token_sha256.toString('hex'), r]));
    const invalid = hashes.findIndex((h) => !byToken.has(h.toString('hex')));
    if (invalid >= 0) throw new ParameterError(`claimTokens[${invalid}] is not a valid claim token (unknown, used or replaced by a newer one)`);
    const deviceIds = rows.map((r) => r.device_id);
    await client.query('UPDATE device SET claimed_environment_id = $2, claimed_at = now(), updated_at = now() WHERE id = ANY($1)', [
      deviceIds,
      monitoringEnvironmentId,
    ]);
    await client.query('DELETE FROM device_claim_token WHERE device_id = ANY($1)', [deviceIds]);
    return hashes.map((h) => byToken.get(h.toString('hex'))!.hash_id);
  });
}

/**
 * unclaim (monitoring side): hands the devices back to their supplier. All must be claimed by this
 * environment. `release` runs in the same transaction first, with the devices' ids (the monitoring
 * side drops its links there).
 */
export async function unclaimDevices(
  db: Db,
  monitoringEnvironmentId: number,
  deviceHashIds: string[],
  release?: (client: Queryable, deviceIds: number[]) => Promise<void>,
): Promise<void> {
  const wanted = [...new Set(deviceHashIds)];
  await db.tx(async (client) => {
    const { rows } = await client.query<{ id: number; hash_id: string }>(
      `UPDATE device SET claimed_environment_id = NULL, claimed_at = NULL, updated_at = now()
        WHERE claimed_environment_id = $1 AND hash_id = ANY($2) RETURNING id, hash_id`,
      [monitoringEnvironmentId, wanted],
    );
    const done = new Set(rows.map((r) => r.hash_id));
    const missing = wanted.filter((h) => !done.has(h));
    // the UPDATE is rolled back with the transaction
    if (missing.length > 0) throw new NotFoundError(missing.length === 1 ? 'device' : 'devices', missing.join(', '));
    if (release)
      await release(
        client,
        rows.map((r) => r.id),
      );
  });
}
