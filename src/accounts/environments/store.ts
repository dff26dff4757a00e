// environment add, supplier add / update / delete: the environments an account makes and ends itself.
//
// An account belongs to one environment, so the caller cannot enter one it adds: each add also makes
// a machine account there holding every right of its type, and answers its assertion (shown once)
// beside the SDK's answer. Everything one customer adds, and what its new environments add in turn,
// descends from the environment the operator made for it (origin_environment_id) and counts against
// ENVIRONMENT_ADD_LIMIT together, so adds cannot multiply without end.

import type { AppContext } from '../../app/context.ts';
import type { Db } from '../../app/db.ts';
import { ConflictError, ParameterError } from '../../app/errors.ts';
import { createEnvironment, createMachineAccount, patchEnvironment, rightsOf, type Account, type EnvironmentRecord, type EnvironmentType } from '../store.ts';

export interface AddedEnvironment {
  environment: EnvironmentRecord;
  rights: string[];
  machineAccount: { hashId: string; assertion: string };
}

/** A new environment of `type` for the caller, with its admin machine account; parameter_error past ENVIRONMENT_ADD_LIMIT. */
export async function addEnvironmentFor(db: Db, limit: number, caller: Account, type: EnvironmentType, name: string): Promise<AddedEnvironment> {
  return db.tx(async (client) => {
    const {
      rows: [origin],
    } = await client.query<{ id: number }>('SELECT COALESCE(origin_environment_id, id) AS id FROM environment WHERE id = $1', [caller.environment.id]);
    // one add at a time per origin, so two at once cannot both take the last place
    await client.query('SELECT 1 FROM environment WHERE id = $1 FOR UPDATE', [origin.id]);
    const {
      rows: [added],
    } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM environment WHERE origin_environment_id = $1 AND deleted_at IS NULL', [origin.id]);
    if (added.n >= limit) {
      throw new ParameterError(
        `name: ${added.n} environments were added from this account's environment and those it added, the most ENVIRONMENT_ADD_LIMIT (${limit}) allows; delete one first`,
      );
    }
    const environment = await createEnvironment(client, type, name);
    await client.query('UPDATE environment SET origin_environment_id = $2 WHERE id = $1', [environment.id, origin.id]);
    const rights = rightsOf(type);
    const machineAccount = await createMachineAccount(client, environment.hashId, rights, caller.name, caller.email ?? undefined);
    return { environment, rights, machineAccount };
  });
}

export interface SupplierUpdate {
  name?: string;
  enforceTwoFactorAuthentication?: boolean;
  theme?: unknown;
}

export async function updateSupplier(db: Db, env: EnvironmentRecord, update: SupplierUpdate): Promise<void> {
  const { name, ...settings } = update;
  await patchEnvironment(db, env, name, settings);
}

const SHOWN = 10;
const CHUNK = 1000;

/**
 * supplier delete: refused (conflict) while a device of the supplier is claimed by a monitoring
 * environment, as a device delete is; then no account reaches it and its devices, certificates and
 * webhooks are refused as their environment is gone (the lookups require a live one).
 */
export async function deleteSupplier(ctx: AppContext, env: EnvironmentRecord): Promise<void> {
  const devices = await ctx.db.tx(async (client) => {
    await client.query('SELECT 1 FROM environment WHERE id = $1 FOR UPDATE', [env.id]);
    const { rows: claimed } = await client.query<{ hash_id: string }>(
      'SELECT hash_id FROM device WHERE environment_id = $1 AND claimed_environment_id IS NOT NULL ORDER BY id LIMIT $2',
      [env.id, SHOWN + 1],
    );
    if (claimed.length > 0) {
      const named =
        claimed
          .slice(0, SHOWN)
          .map((r) => r.hash_id)
          .join(', ') + (claimed.length > SHOWN ? ', ...' : '');
      throw new ConflictError(
        `device ${named} is claimed by a monitoring environment: the supplier cannot be deleted until its devices are unclaimed; nothing was deleted`,
      );
    }
    await client.query('UPDATE environment SET deleted_at = now(), updated_at = now() WHERE id = $1', [env.id]);
    const { rows } = await client.query<{ hash_id: string; psk_identity: string | null }>(
      'SELECT hash_id, psk_identity FROM device WHERE environment_id = $1',
      [env.id],
    );
    return rows;
  });
  for (let i = 0; i < devices.length; i += CHUNK) {
    const chunk = devices.slice(i, i + CHUNK);
    await ctx.changes.publish('credentials', { identities: chunk.flatMap((d) => (d.psk_identity === null ? [] : [d.psk_identity])) });
    await ctx.changes.publish('devices', { hashIds: chunk.map((d) => d.hash_id) });
  }
  await ctx.changes.publish('trust', { environmentIds: [env.id] });
}
