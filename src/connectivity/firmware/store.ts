import { createHash } from 'node:crypto';
import type { Queryable } from '../../app/db.ts';
import { ConflictError, NotFoundError, ParameterError } from '../../app/errors.ts';
import { findPage, type FindQuery } from '../../app/find.ts';
import { newHashId } from '../../app/hash-id.ts';
import { loadDeviceType } from '../device-types/store.ts';

export interface FirmwareInput {
  deviceTypeHashId: string;
  version: string;
  /** the image, base64 */
  data: string;
}

/** A firmware image as the API shows it (never its bytes). */
export interface Firmware {
  hashId: string;
  deviceTypeHashId: string;
  version: string;
  /** bytes */
  size: number;
  /** hex */
  sha256: string;
  createdAt: string;
}

const SELECT = 'f.id, f.hash_id, t.hash_id AS device_type_hash_id, f.version, f.size, f.sha256, f.created_at';
const FROM = 'firmware f JOIN device_type t ON t.id = f.device_type_id';

function toFirmware(r: Record<string, unknown>): Firmware {
  return {
    hashId: r.hash_id as string,
    deviceTypeHashId: r.device_type_hash_id as string,
    version: r.version as string,
    size: r.size as number,
    sha256: r.sha256 as string,
    createdAt: (r.created_at as Date).toISOString(),
  };
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes `data`, refusing anything that is not canonical base64 or is larger than `maxBytes`. */
export function decodeImage(data: string, maxBytes: number): Buffer {
  if (data.length === 0) throw new ParameterError('data must not be empty: it is the firmware image, base64');
  // checked before decoding: an oversized body is refused without allocating its image
  if (Math.floor(data.length / 4) * 3 > maxBytes + 2) throw new ParameterError(`data is larger than the firmware size limit of ${maxBytes} bytes`);
  if (data.length % 4 !== 0 || !BASE64.test(data)) throw new ParameterError('data must be base64 (RFC 4648, with padding)');
  const image = Buffer.from(data, 'base64');
  if (image.length > maxBytes) throw new ParameterError(`data is larger than the firmware size limit of ${maxBytes} bytes (it has ${image.length})`);
  return image;
}

const isUniqueViolation = (err: unknown): boolean => typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';

export async function addFirmware(
  db: Queryable,
  environmentId: number,
  input: FirmwareInput,
  maxBytes: number,
): Promise<{ hashId: string; size: number; sha256: string }> {
  const image = decodeImage(input.data, maxBytes);
  const type = await loadDeviceType(db, environmentId, input.deviceTypeHashId);
  const hashId = newHashId();
  const sha256 = createHash('sha256').update(image).digest('hex');
  try {
    await db.query(`INSERT INTO firmware (hash_id, environment_id, device_type_id, version, size, sha256, data) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
      hashId,
      environmentId,
      type.id,
      input.version,
      image.length,
      sha256,
      image,
    ]);
  } catch (err) {
    if (isUniqueViolation(err)) throw new ConflictError(`device type ${input.deviceTypeHashId} already has firmware version ${input.version}`);
    throw err;
  }
  return { hashId, size: image.length, sha256 };
}

export async function getFirmware(db: Queryable, environmentId: number, hashId: string): Promise<{ firmware: Firmware }> {
  const { rows } = await db.query(`SELECT ${SELECT} FROM ${FROM} WHERE f.environment_id = $1 AND f.hash_id = $2`, [environmentId, hashId]);
  if (rows.length === 0) throw new NotFoundError('firmware', hashId);
  return { firmware: toFirmware(rows[0]) };
}

export async function findFirmware(db: Queryable, environmentId: number, query: FindQuery & { deviceTypeHashId?: string | null }) {
  const where = ['f.environment_id = $1'];
  const params: unknown[] = [environmentId];
  if (query.deviceTypeHashId) {
    params.push(query.deviceTypeHashId);
    where.push(`t.hash_id = $${params.length}`);
  }
  const page = await findPage(
    db,
    {
      from: FROM,
      select: SELECT,
      idColumn: 'f.id',
      where,
      params,
      sortable: { hashId: 'f.hash_id', version: 'f.version', createdAt: 'f.created_at', size: 'f.size' },
      search: ['f.version', 'f.hash_id', 'f.sha256'],
      updatedColumn: 'f.updated_at',
    },
    query,
  );
  return { nextPageOffset: page.nextPageOffset, rows: page.rows.map((r) => ({ firmware: toFirmware(r) })) };
}

/** Hard delete: the image's bytes go with it; a device that asks for it afterwards gets 404. */
export async function deleteFirmware(db: Queryable, environmentId: number, hashId: string): Promise<void> {
  const { rowCount } = await db.query('DELETE FROM firmware WHERE environment_id = $1 AND hash_id = $2', [environmentId, hashId]);
  if (!rowCount) throw new NotFoundError('firmware', hashId);
}
