import type { Queryable } from '../app/db.ts';
import { TtlCache } from '../app/ttl-cache.ts';

export interface DeviceRecord {
  id: number;
  hashId: string;
  environmentId: number;
  environmentHashId: string;
  supplierDeviceIdentifier: string;
  fields: Record<string, unknown>;
  lastOnlineAt: string | null;
  nextReportBefore: string | null;
  deviceType: { id: number; hashId: string; eventHandler: string; deleted: boolean };
}

export interface ReportTypeRecord { id: number; hashId: string; name: string; parser: string }
export interface QuantityRecord { hashId: string; name: unknown; unit: string; color: string }

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

/**
 * What a worker needs to run a device's code, cached for `ttlMs` (changes to a device type or
 * report type reach workers within that bound).
 */
export class DeviceContextLoader {
  private readonly devices: TtlCache<DeviceRecord | null>;
  private readonly reportTypes: TtlCache<ReportTypeRecord | null>;
  private readonly quantities: TtlCache<Map<string, QuantityRecord>>;
  private readonly db: Queryable;

  constructor(db: Queryable, ttlMs = 2000) {
    this.db = db;
    this.devices = new TtlCache(ttlMs);
    this.reportTypes = new TtlCache(ttlMs);
    this.quantities = new TtlCache(ttlMs);
  }

  device(hashId: string): Promise<DeviceRecord | null> {
    return this.devices.get(hashId, async () => {
      const { rows } = await this.db.query(
        `SELECT d.id, d.hash_id, d.environment_id, e.hash_id AS env_hash_id, d.supplier_device_identifier, d.fields,
                d.last_online_at, d.next_report_before, t.id AS type_id, t.hash_id AS type_hash_id, t.event_handler,
                t.deleted_at IS NOT NULL AS type_deleted
           FROM device d JOIN device_type t ON t.id = d.device_type_id JOIN environment e ON e.id = d.environment_id
          WHERE d.hash_id = $1`, [hashId]);
      if (rows.length === 0) return null;
      const r = rows[0];
      return {
        id: r.id as number, hashId: r.hash_id as string, environmentId: r.environment_id as number, environmentHashId: r.env_hash_id as string,
        supplierDeviceIdentifier: r.supplier_device_identifier as string, fields: r.fields as Record<string, unknown>,
        lastOnlineAt: iso(r.last_online_at), nextReportBefore: iso(r.next_report_before),
        deviceType: { id: r.type_id as number, hashId: r.type_hash_id as string, eventHandler: r.event_handler as string, deleted: r.type_deleted as boolean },
      };
    });
  }

  reportType(environmentId: number, hashId: string): Promise<ReportTypeRecord | null> {
    return this.reportTypes.get(`${environmentId}:${hashId}`, async () => {
      const { rows } = await this.db.query('SELECT id, hash_id, name, parser FROM report_type WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL', [environmentId, hashId]);
      return rows.length === 0 ? null : { id: rows[0].id as number, hashId: rows[0].hash_id as string, name: rows[0].name as string, parser: rows[0].parser as string };
    });
  }

  quantitiesOf(environmentId: number): Promise<Map<string, QuantityRecord>> {
    return this.quantities.get(String(environmentId), async () => {
      const { rows } = await this.db.query('SELECT hash_id, name, unit, color FROM quantity WHERE environment_id = $1 AND deleted_at IS NULL', [environmentId]);
      return new Map(rows.map((r) => [r.hash_id as string, { hashId: r.hash_id as string, name: r.name, unit: r.unit as string, color: r.color as string }]));
    });
  }

  /**
   * reportLate: whether the expectation `before` (set at `setAt`) still stands and no contact came
   * since. Read fresh, not cached. lastOnlineAt is kept to a second, so a contact within a second
   * of the one that set the expectation may go unseen; handlers renew the expectation on each report.
   */
  async reportStillLate(deviceId: number, before: string, setAt: string): Promise<boolean> {
    const { rows } = await this.db.query(
      'SELECT next_report_before = $2::timestamptz AS same, last_online_at > $3::timestamptz AS contacted FROM device WHERE id = $1', [deviceId, before, setAt]);
    return rows.length > 0 && rows[0].same === true && rows[0].contacted !== true;
  }

  /** The device's own copy changed (fields, nextReportBefore): read it afresh next time. */
  forgetDevice(hashId: string): void { this.devices.delete(hashId); }
}
