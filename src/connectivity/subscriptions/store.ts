// Subscriptions of users to failures of a supplier object's code (the SDK's userSubscription): a device
// type (its event handler), a report type (its parser), a webhook or a certificate (their identifiers).
// The rows live in supplier_subscription, which the alert mails read and count in (src/notifications/).
// A subscription whose object is deleted is kept but no longer listed: nothing can fail any more.

import type { Queryable, Row } from '../../app/db.ts';
import { NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import type { Account } from '../../accounts/store.ts';

export const OBJECT_TYPES = ['deviceType', 'supplierReportType', 'supplierWebhook', 'supplierCertificate'] as const;
export type ObjectType = (typeof OBJECT_TYPES)[number];

/** Each object type's table and display-name column. */
const OBJECTS: Record<ObjectType, { table: string; name: string }> = {
  deviceType: { table: 'device_type', name: 'name_text' },
  supplierReportType: { table: 'report_type', name: 'name_text' },
  supplierWebhook: { table: 'supplier_webhook', name: 'name' },
  supplierCertificate: { table: 'supplier_certificate', name: 'name' },
};

/** The live object a subscription names, as a LATERAL subquery over `s` (one branch per type). */
const OBJECT_OF_SUBSCRIPTION = `(${OBJECT_TYPES.map(
  (type) => `SELECT o.hash_id, o.${OBJECTS[type].name} AS name FROM ${OBJECTS[type].table} o
    WHERE s.object_type = '${type}' AND o.id = s.object_id AND o.deleted_at IS NULL`,
).join('\n  UNION ALL ')})`;

export interface SubscriptionInput {
  objectType: ObjectType;
  objectHashId: string;
  /** another user of the environment (a person, who never logs in); the caller when absent */
  userHashId?: string;
}

/** The user a subscription is for: the caller, or a live user of its environment named by hashId. */
async function subscriber(db: Queryable, caller: Account, userHashId: string | undefined): Promise<number> {
  if (userHashId === undefined || userHashId === caller.hashId) return caller.id;
  const { rows } = await db.query<{ id: number }>('SELECT id FROM machine_account WHERE environment_id = $1 AND hash_id = $2 AND revoked_at IS NULL', [
    caller.environment.id,
    userHashId,
  ]);
  if (rows.length === 0) throw new ParameterError(`userHashId: no user ${userHashId} in this environment`);
  return rows[0].id;
}

/** Subscribes a user (the caller, or `userHashId`) to an object of the caller's environment; subscribing twice answers the subscription that exists. */
export async function subscribe(db: Queryable, caller: Account, input: SubscriptionInput): Promise<{ hashId: string }> {
  const { table } = OBJECTS[input.objectType];
  const { rows } = await db.query<{ id: number }>(`SELECT id FROM ${table} WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL`, [
    caller.environment.id,
    input.objectHashId,
  ]);
  if (rows.length === 0) throw new ParameterError(`objectHashId: no ${input.objectType} ${input.objectHashId} in this environment`);
  return subscribeUser(db, caller.environment.id, await subscriber(db, caller, input.userHashId), input.objectType, rows[0].id);
}

/** The insert itself, for an object already checked (device type add, in its own transaction). */
export async function subscribeUser(
  db: Queryable,
  environmentId: number,
  userId: number,
  objectType: ObjectType,
  objectId: number,
  hashId = newHashId(),
): Promise<{ hashId: string }> {
  const { rows } = await db.query<{ hash_id: string }>(
    `WITH added AS (
       INSERT INTO supplier_subscription (hash_id, environment_id, user_id, object_type, object_id) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (object_type, object_id, user_id) DO NOTHING RETURNING hash_id)
     SELECT hash_id FROM added
     UNION ALL SELECT hash_id FROM supplier_subscription WHERE object_type = $4 AND object_id = $5 AND user_id = $3`,
    [hashId, environmentId, userId, objectType, objectId],
  );
  if (rows.length > 0) return { hashId: rows[0].hash_id };
  // a concurrent subscribe committed the same row after this statement's snapshot: read it now
  const existing = await db.query<{ hash_id: string }>('SELECT hash_id FROM supplier_subscription WHERE object_type = $1 AND object_id = $2 AND user_id = $3', [
    objectType,
    objectId,
    userId,
  ]);
  return { hashId: existing.rows[0].hash_id };
}

/** The hashId of the user's subscription to an object, undefined when there is none. */
export async function subscriptionOf(db: Queryable, userId: number, objectType: ObjectType, objectId: number): Promise<string | undefined> {
  const { rows } = await db.query<{ hash_id: string }>('SELECT hash_id FROM supplier_subscription WHERE user_id = $1 AND object_type = $2 AND object_id = $3', [
    userId,
    objectType,
    objectId,
  ]);
  return rows[0]?.hash_id;
}

export interface SubscriptionFindQuery extends FindQuery {
  supplierHashId?: string;
  userHashId?: string;
}

function toRow(r: Row) {
  return {
    objectName: r.object_name as string,
    subscription: {
      hashId: r.hash_id as string,
      objectType: r.object_type as ObjectType,
      objectHashId: r.object_hash_id as string,
      lastNotification: r.last_notification === null ? null : (r.last_notification as Date).toISOString(),
      alertsSinceLastNotification: r.alerts_since_last_notification as number,
      createdAt: (r.created_at as Date).toISOString(),
    },
  };
}

/** A user's subscriptions (the caller's unless `userHashId` names another user of its environment). */
export async function findSubscriptions(db: Queryable, caller: Account, query: SubscriptionFindQuery) {
  // the caller's account has one environment: any other supplierHashId has no rows for it
  if (query.supplierHashId !== undefined && query.supplierHashId !== caller.environment.hashId) return { nextPageOffset: null, rows: [] };
  const userId = await subscriber(db, caller, query.userHashId);
  const page = await findPage(
    db,
    {
      from: `supplier_subscription s CROSS JOIN LATERAL ${OBJECT_OF_SUBSCRIPTION} o`,
      select: `s.hash_id, s.object_type, o.hash_id AS object_hash_id, o.name AS object_name, s.last_notification, s.alerts_since_last_notification, s.created_at`,
      idColumn: 's.id',
      where: ['s.environment_id = $1', 's.user_id = $2'],
      params: [caller.environment.id, userId],
      sortable: { hashId: 's.hash_id', objectType: 's.object_type' },
      search: ['o.name', 's.hash_id', 'o.hash_id'],
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map(toRow) };
}

/** Deletes a subscription of the caller's environment (another environment's is not found). */
export async function unsubscribe(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query('DELETE FROM supplier_subscription WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (!rowCount) throw new NotFoundError('subscription', hashId);
}
