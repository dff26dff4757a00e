import type { AppContext } from '../app/context.ts';
import { namedStatement, type Queryable } from '../app/db.ts';
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
  /** the pin group link of a claimed device: its id and the pin id of each mapped channel */
  link: { id: number; pins: Record<string, number> } | null;
}

/** name: a stringOrTranslations (jsonb) */
export interface ReportTypeRecord {
  id: number;
  hashId: string;
  name: string | Record<string, unknown>;
  parser: string;
}
export interface QuantityRecord {
  hashId: string;
  name: unknown;
  unit: string;
  color: string;
}

const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null);

const DEVICE_SELECT = `SELECT d.id, d.hash_id, d.environment_id, e.hash_id AS env_hash_id, d.supplier_device_identifier, d.fields,
       d.last_online_at, d.next_report_before, t.id AS type_id, t.hash_id AS type_hash_id, t.event_handler,
       t.deleted_at IS NOT NULL AS type_deleted, l.id AS link_id,
       (SELECT json_object_agg(c.channel, c.pin_id) FROM device_link_channel c WHERE c.link_id = l.id) AS link_pins
  FROM device d JOIN device_type t ON t.id = d.device_type_id JOIN environment e ON e.id = d.environment_id
  LEFT JOIN device_link l ON l.device_id = d.id`;

const DEVICES_BY_HASH_ID = namedStatement('devices-by-hash-id', `${DEVICE_SELECT} WHERE d.hash_id = ANY($1::text[])`);

function toDeviceRecord(r: Record<string, unknown>): DeviceRecord {
  return {
    id: r.id as number,
    hashId: r.hash_id as string,
    environmentId: r.environment_id as number,
    environmentHashId: r.env_hash_id as string,
    supplierDeviceIdentifier: r.supplier_device_identifier as string,
    fields: r.fields as Record<string, unknown>,
    lastOnlineAt: iso(r.last_online_at),
    nextReportBefore: iso(r.next_report_before),
    deviceType: { id: r.type_id as number, hashId: r.type_hash_id as string, eventHandler: r.event_handler as string, deleted: r.type_deleted as boolean },
    link: r.link_id === null ? null : { id: r.link_id as number, pins: (r.link_pins as Record<string, number> | null) ?? {} },
  };
}

interface DeviceEntry {
  at: number;
  value: Promise<DeviceRecord | null>;
  refreshing: boolean;
}

const MAX_DEVICES = 50_000;

/**
 * What a worker needs to run a device's code, cached for `ttlMs` (changes to a device type or
 * report type reach workers within that bound).
 *
 * Devices are the hot part: every contact needs its device. The devices asked for in one tick are
 * read in one query, and an entry past half its ttl is read again in the background while it is
 * still served, so a device that reports often never waits for PostgreSQL and its copy is never
 * older than `ttlMs`.
 */
export class DeviceContextLoader {
  private readonly devices = new Map<string, DeviceEntry>();
  private readonly reportTypes: TtlCache<ReportTypeRecord | null>;
  private readonly quantities: TtlCache<Map<string, QuantityRecord>>;
  private readonly db: Queryable;
  private readonly ttlMs: number;
  private wanted = new Map<string, { resolve(d: DeviceRecord | null): void; reject(err: unknown): void }[]>();

  constructor(db: Queryable, ttlMs = 2000) {
    this.db = db;
    this.ttlMs = ttlMs;
    this.reportTypes = new TtlCache(ttlMs);
    this.quantities = new TtlCache(ttlMs);
  }

  device(hashId: string): Promise<DeviceRecord | null> {
    const now = Date.now();
    const hit = this.devices.get(hashId);
    if (hit && now - hit.at < this.ttlMs) {
      if (now - hit.at >= this.ttlMs / 2 && !hit.refreshing) this.refresh(hashId, hit, now);
      return hit.value;
    }
    const entry: DeviceEntry = { at: now, value: this.read(hashId), refreshing: false };
    this.devices.set(hashId, entry);
    entry.value.catch(() => {
      if (this.devices.get(hashId) === entry) this.devices.delete(hashId);
    });
    if (this.devices.size > MAX_DEVICES) this.devices.delete(this.devices.keys().next().value as string);
    return entry.value;
  }

  /** Reads the device again while the current copy is served; a copy forgotten meanwhile is not brought back. */
  private refresh(hashId: string, entry: DeviceEntry, now: number): void {
    entry.refreshing = true;
    this.read(hashId).then(
      (device) => {
        if (this.devices.get(hashId) === entry) this.devices.set(hashId, { at: now, value: Promise.resolve(device), refreshing: false });
      },
      () => {
        entry.refreshing = false;
      },
    );
  }

  /** The devices wanted in one tick, read with one query. */
  private read(hashId: string): Promise<DeviceRecord | null> {
    return new Promise((resolve, reject) => {
      if (this.wanted.size === 0) setImmediate(() => this.readWanted());
      const waiting = this.wanted.get(hashId);
      if (waiting) waiting.push({ resolve, reject });
      else this.wanted.set(hashId, [{ resolve, reject }]);
    });
  }

  private readWanted(): void {
    const wanted = this.wanted;
    this.wanted = new Map();
    this.db.query(DEVICES_BY_HASH_ID, [[...wanted.keys()]]).then(
      ({ rows }) => {
        const found = new Map(rows.map((r) => [r.hash_id as string, toDeviceRecord(r)]));
        for (const [hashId, waiting] of wanted) for (const w of waiting) w.resolve(found.get(hashId) ?? null);
      },
      (err: unknown) => {
        for (const waiting of wanted.values()) for (const w of waiting) w.reject(err);
      },
    );
  }

  reportType(environmentId: number, hashId: string): Promise<ReportTypeRecord | null> {
    return this.reportTypes.get(`${environmentId}:${hashId}`, async () => {
      const { rows } = await this.db.query(
        'SELECT id, hash_id, name, parser FROM report_type WHERE environment_id = $1 AND hash_id = $2 AND deleted_at IS NULL',
        [environmentId, hashId],
      );
      return rows.length === 0
        ? null
        : { id: rows[0].id as number, hashId: rows[0].hash_id as string, name: rows[0].name as string, parser: rows[0].parser as string };
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
      'SELECT next_report_before = $2::timestamptz AS same, last_online_at > $3::timestamptz AS contacted FROM device WHERE id = $1',
      [deviceId, before, setAt],
    );
    return rows.length > 0 && rows[0].same === true && rows[0].contacted !== true;
  }

  /** The device's own copy changed (fields, nextReportBefore): read it afresh next time. */
  forgetDevice(hashId: string): void {
    this.devices.delete(hashId);
  }

  #stopWatching: (() => void) | null = null;

  /**
   * Hears the `devices` changes of every process (src/app/changes.ts: a link, unlink or channel mapping made here or
   * elsewhere): the devices named are read afresh on their next contact instead of up to `ttlMs` later. Resolves once
   * other processes' changes are subscribed. After the subscriber reconnects every device is read afresh, since
   * changes published meanwhile are lost.
   */
  async watch(ctx: Pick<AppContext, 'changes'>): Promise<void> {
    this.#stopWatching?.();
    this.#stopWatching = ctx.changes.on('devices', (change) => {
      if (change === null) this.devices.clear();
      else for (const hashId of change.hashIds) this.forgetDevice(hashId);
    });
    await ctx.changes.listen();
  }

  async unwatch(): Promise<void> {
    this.#stopWatching?.();
    this.#stopWatching = null;
  }
}
