import type { Queryable } from '../../app/db.ts';

/** The answer header that carries firmware offers (HTTPS as is; CoAP answers carry it in the same text form). */
export const FIRMWARE_OFFER_HEADER = 'x-firmware';

export type FirmwareOffer =
  { ok: true; reference: string; firmware: { hashId: string; version: string; size: number; sha256: string } } | { ok: false; message: string };

/**
 * Resolves `exec.offerFirmware(hashId)` for a device: the image must be of the device's own
 * device type. The reference is `/firmware/<hashId>; sha256=<hex>; size=<bytes>; version=<percent-encoded>`,
 * the path being where the device downloads it on the port it came in on.
 */
export async function offerFirmware(
  db: Queryable,
  device: { environmentId: number; deviceTypeId: number; deviceTypeHashId: string },
  hashId: string,
): Promise<FirmwareOffer> {
  const { rows } = await db.query<{ hash_id: string; device_type_id: number; type_hash_id: string; version: string; size: number; sha256: string }>(
    `SELECT f.hash_id, f.device_type_id, t.hash_id AS type_hash_id, f.version, f.size, f.sha256
       FROM firmware f JOIN device_type t ON t.id = f.device_type_id WHERE f.environment_id = $1 AND f.hash_id = $2`,
    [device.environmentId, hashId],
  );
  if (rows.length === 0) return { ok: false, message: `firmware ${hashId} does not exist in this environment` };
  const f = rows[0];
  if (f.device_type_id !== device.deviceTypeId) {
    return {
      ok: false,
      message: `firmware ${hashId} is for device type ${f.type_hash_id}, not for this device's type ${device.deviceTypeHashId}: not offered`,
    };
  }
  return {
    ok: true,
    reference: `/firmware/${f.hash_id}; sha256=${f.sha256}; size=${f.size}; version=${encodeURIComponent(f.version)}`,
    firmware: { hashId: f.hash_id, version: f.version, size: f.size, sha256: f.sha256 },
  };
}
