import type http from 'node:http';
import type { AppContext, AppStores } from '../app/context.ts';
import { TtlCache } from '../app/ttl-cache.ts';
import { LastOnlineWriter } from '../connectivity/devices/last-online.ts';
import { ContentFormat, encodeUint, stringOptions, type CoapOption, type CoapRequest, type CoapResponse } from '../coap/index.ts';
import { FIRMWARE_OFFER_HEADER } from '../connectivity/firmware/offer.ts';

// Devices download firmware over their own authenticated session, served by the gateway itself
// (no queue, no handler). `readFirmwareRange` knows no protocol: the HTTPS listener serves it
// with Range, the CoAP listener with Block2 (both in this file).

/** The authenticated device asking. */
export interface FirmwareDevice {
  hashId: string;
}

/** What a device learns of an image: enough to resume and verify a download. */
export interface FirmwareImageInfo {
  hashId: string;
  version: string;
  size: number;
  /** hex; also the ETag */
  sha256: string;
}

export type FirmwareRead =
  | { status: 'ok'; firmware: FirmwareImageInfo; offset: number; bytes: Buffer }
  /** unknown, deleted, or of another environment: the device learns nothing of other tenants */
  | { status: 'not_found'; message: string }
  /** an image of another device type of the same environment */
  | { status: 'forbidden'; message: string }
  | { status: 'range_not_satisfiable'; firmware: FirmwareImageInfo; message: string };

interface ImageRecord extends FirmwareImageInfo {
  id: number;
  environmentId: number;
  deviceTypeId: number;
  deviceTypeHashId: string;
}
interface DeviceRecord {
  id: number;
  environmentId: number;
  deviceTypeId: number;
}

/** Metadata is cached this long: a device reading block after block costs no query per block. */
const META_TTL_MS = 2000;

/** Whole images by sha256, least recently used first out, bounded by FIRMWARE_CACHE_BYTES. */
export class ImageCache {
  private readonly images = new Map<string, Promise<Buffer>>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;
  private readonly budget: number;
  constructor(budget: number) {
    this.budget = budget;
  }

  /** Images larger than half the budget are never cached: they are read range by range. */
  fits(size: number): boolean {
    return size <= this.budget / 2;
  }

  get(sha256: string, size: number, load: () => Promise<Buffer>): Promise<Buffer> {
    const hit = this.images.get(sha256);
    if (hit) {
      // Map keeps insertion order: re-inserting marks it most recently used
      this.images.delete(sha256);
      this.images.set(sha256, hit);
      return hit;
    }
    while (this.bytes + size > this.budget && this.images.size > 0) {
      const oldest = this.images.keys().next().value as string;
      this.drop(oldest);
    }
    const value = load();
    this.images.set(sha256, value);
    this.sizes.set(sha256, size);
    this.bytes += size;
    value.catch(() => this.drop(sha256));
    return value;
  }

  private drop(sha256: string): void {
    if (!this.images.delete(sha256)) return;
    this.bytes -= this.sizes.get(sha256) ?? 0;
    this.sizes.delete(sha256);
  }
}

/** A context's firmware caches (`ctx.firmware`): device and image records, image bytes, and the contacts to write. */
export interface FirmwareState {
  devices: TtlCache<DeviceRecord | null>;
  images: TtlCache<ImageRecord | null>;
  bytes: ImageCache;
  lastOnline: LastOnlineWriter;
}

declare module '../app/context.ts' {
  interface AppContext {
    /** the firmware download caches of this context (src/gateway/firmware.ts) */
    firmware: FirmwareState;
  }
}

/** The firmware state of a new context (src/context.ts): empty caches, bounded by FIRMWARE_CACHE_BYTES. */
export function createFirmwareState(stores: Pick<AppStores, 'config' | 'db' | 'log'>): FirmwareState {
  return {
    devices: new TtlCache(META_TTL_MS, 10_000),
    images: new TtlCache(META_TTL_MS, 10_000),
    bytes: new ImageCache(stores.config.firmwareCacheBytes),
    lastOnline: new LastOnlineWriter(stores.db, stores.log),
  };
}

const stateOf = (ctx: AppContext): FirmwareState => ctx.firmware;

function loadDevice(ctx: AppContext, hashId: string): Promise<DeviceRecord | null> {
  return stateOf(ctx).devices.get(hashId, async () => {
    const { rows } = await ctx.db.query<{ id: number; environment_id: number; device_type_id: number }>(
      `SELECT d.id, d.environment_id, d.device_type_id FROM device d JOIN device_type t ON t.id = d.device_type_id
        WHERE d.hash_id = $1 AND t.deleted_at IS NULL`,
      [hashId],
    );
    return rows.length === 0 ? null : { id: rows[0].id, environmentId: rows[0].environment_id, deviceTypeId: rows[0].device_type_id };
  });
}

function loadImage(ctx: AppContext, hashId: string): Promise<ImageRecord | null> {
  return stateOf(ctx).images.get(hashId, async () => {
    const { rows } = await ctx.db.query(
      `SELECT f.id, f.hash_id, f.environment_id, f.device_type_id, t.hash_id AS device_type_hash_id, f.version, f.size, f.sha256
         FROM firmware f JOIN device_type t ON t.id = f.device_type_id WHERE f.hash_id = $1`,
      [hashId],
    );
    if (rows.length === 0) return null;
    const r = rows[0];
    return {
      id: r.id as number,
      hashId: r.hash_id as string,
      environmentId: r.environment_id as number,
      deviceTypeId: r.device_type_id as number,
      deviceTypeHashId: r.device_type_hash_id as string,
      version: r.version as string,
      size: r.size as number,
      sha256: r.sha256 as string,
    };
  });
}

const info = (image: ImageRecord): FirmwareImageInfo => ({ hashId: image.hashId, version: image.version, size: image.size, sha256: image.sha256 });

/**
 * Reads `length` bytes of firmware `hashId` from `offset` for `device` (fewer at the end of the
 * image; `length` 0 reads only the metadata). The device must be of the image's device type.
 */
export async function readFirmwareRange(ctx: AppContext, device: FirmwareDevice, hashId: string, offset: number, length: number): Promise<FirmwareRead> {
  const [own, image] = await Promise.all([loadDevice(ctx, device.hashId), loadImage(ctx, hashId)]);
  if (!own || !image || image.environmentId !== own.environmentId) return { status: 'not_found', message: `firmware ${hashId} not found` };
  if (image.deviceTypeId !== own.deviceTypeId) {
    return { status: 'forbidden', message: `firmware ${hashId} is for device type ${image.deviceTypeHashId}, not this device's` };
  }
  if (
    !Number.isSafeInteger(offset) ||
    offset < 0 ||
    (offset >= image.size && !(offset === 0 && image.size === 0)) ||
    !Number.isSafeInteger(length) ||
    length < 0
  ) {
    return { status: 'range_not_satisfiable', firmware: info(image), message: `offset ${offset} is outside firmware ${hashId} of ${image.size} bytes` };
  }
  const end = Math.min(image.size, offset + length);
  if (end === offset) return { status: 'ok', firmware: info(image), offset, bytes: Buffer.alloc(0) };
  const state = stateOf(ctx);
  let bytes: Buffer;
  if (state.bytes.fits(image.size)) {
    const whole = await state.bytes.get(image.sha256, image.size, async () => {
      const { rows } = await ctx.db.query<{ data: Buffer }>('SELECT data FROM firmware WHERE id = $1', [image.id]);
      if (rows.length === 0) throw new Error(`firmware ${hashId} was deleted while it was read`);
      return rows[0].data;
    });
    bytes = whole.subarray(offset, end);
  } else {
    // STORAGE EXTERNAL: PostgreSQL reads only the slice's chunks
    const { rows } = await ctx.db.query<{ data: Buffer }>('SELECT substring(data FROM $2 FOR $3) AS data FROM firmware WHERE id = $1', [
      image.id,
      offset + 1,
      end - offset,
    ]);
    if (rows.length === 0) return { status: 'not_found', message: `firmware ${hashId} not found` };
    bytes = rows[0].data;
  }
  return { status: 'ok', firmware: info(image), offset, bytes };
}

const FIRMWARE_PATH = /^\/firmware\/([a-zA-Z0-9]{1,64})\/?$/;

/** The firmware hashId of a device's `GET|HEAD /firmware/<hashId>`, or null for every other request. */
export function firmwareRequestHashId(method: string | undefined, url: string | undefined): string | null {
  if (method !== 'GET' && method !== 'HEAD') return null;
  const path = (url ?? '/').split('?')[0];
  return FIRMWARE_PATH.exec(path)?.[1] ?? null;
}

/** A single `bytes=` range of a `size`-byte image: [start, endExclusive], 'ignore' for another unit, null when unsatisfiable or malformed. */
export function parseRange(header: string, size: number): [number, number] | 'ignore' | null {
  const m = /^\s*([A-Za-z]+)=(.*)$/.exec(header);
  if (!m) return null;
  if (m[1].toLowerCase() !== 'bytes') return 'ignore';
  // one range per request: a device resumes a download, it does not ask for pieces of it
  const spec = /^\s*(\d*)-(\d*)\s*$/.exec(m[2]);
  if (!spec || (spec[1] === '' && spec[2] === '')) return null;
  if (spec[1] === '') {
    const suffix = Number(spec[2]);
    if (suffix === 0 || size === 0) return null;
    return [Math.max(0, size - suffix), size];
  }
  const start = Number(spec[1]);
  const last = spec[2] === '' ? size - 1 : Math.min(Number(spec[2]), size - 1);
  if (start >= size || last < start) return null;
  return [start, last + 1];
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const payload = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': payload.length });
  res.end(payload);
}

const etagOf = (sha256: string) => `"${sha256}"`;
const etagMatches = (header: string, etag: string) =>
  header.split(',').some((t) => {
    const v = t.trim();
    return v === '*' || v.replace(/^W\//, '') === etag;
  });

/**
 * A firmware request is an authenticated contact that no worker sees: it moves lastOnlineAt here, as a queued request
 * does in the worker, so a device downloading instead of reporting is not taken for late. The answer does not wait.
 * Written as the worker writes it (pipeline/last-online.ts): at most once a second per device, however many blocks or
 * ranges it asks for, and a store outage is one warn line when it starts and one when it ends, not one per request (a
 * device that cannot be read is not touched: its request fails on the same read and says so).
 */
function touchDevice(ctx: AppContext, device: FirmwareDevice): void {
  const at = new Date();
  loadDevice(ctx, device.hashId).then(
    (own) => {
      if (own) stateOf(ctx).lastOnline.heard(own.id, at);
    },
    () => undefined,
  );
}

/** Writes the firmware contacts still waiting for their second (the gateway's shutdown). */
export async function closeFirmware(ctx: AppContext): Promise<void> {
  await ctx.firmware.lastOnline.close();
}

/** HTTPS `GET|HEAD /firmware/<hashId>`: Range (206, 416), ETag (the sha256), If-None-Match (304), If-Range. */
export async function serveFirmwareOverHttps(
  ctx: AppContext,
  device: FirmwareDevice,
  hashId: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  touchDevice(ctx, device);
  const meta = await readFirmwareRange(ctx, device, hashId, 0, 0);
  if (meta.status === 'not_found') return sendJson(res, 404, { key: 'not_found_error', message: meta.message });
  if (meta.status === 'forbidden') return sendJson(res, 403, { key: 'right_error', message: meta.message });
  const { firmware } = meta;
  const etag = etagOf(firmware.sha256);
  const common = { etag, 'accept-ranges': 'bytes', 'x-firmware-version': encodeURIComponent(firmware.version) };
  const ifNoneMatch = req.headers['if-none-match'];
  if (ifNoneMatch && etagMatches(ifNoneMatch, etag)) {
    res.writeHead(304, common);
    res.end();
    return;
  }
  let start = 0;
  let end = firmware.size;
  let status = 200;
  const range = req.headers.range;
  const ifRange = req.headers['if-range'] as string | undefined;
  // If-Range with another validator: the image changed under the device, so it gets the whole new one
  if (range !== undefined && (ifRange === undefined || ifRange.trim() === etag)) {
    const parsed = parseRange(range, firmware.size);
    if (parsed === null) {
      return sendJson(
        res,
        416,
        { key: 'parameter_error', message: `Range ${range} is not one satisfiable byte range of firmware ${hashId} (${firmware.size} bytes)` },
        { ...common, 'content-range': `bytes */${firmware.size}` },
      );
    }
    if (parsed !== 'ignore') [start, end, status] = [parsed[0], parsed[1], 206];
  }
  const headers: Record<string, string | number> = { ...common, 'content-type': 'application/octet-stream', 'content-length': end - start };
  if (status === 206) headers['content-range'] = `bytes ${start}-${end - 1}/${firmware.size}`;
  if (req.method === 'HEAD') {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  const read = await readFirmwareRange(ctx, device, hashId, start, end - start);
  if (read.status !== 'ok') return sendJson(res, 404, { key: 'not_found_error', message: `firmware ${hashId} not found` });
  res.writeHead(status, headers);
  res.end(read.bytes);
}

/** CoAP `GET /firmware/<hashId>`: the firmware hashId, or null for every other request. */
export function coapFirmwareHashId(req: CoapRequest): string | null {
  const path = stringOptions(req.options, 'Uri-Path');
  return req.method === 'GET' && path.length === 2 && path[0] === 'firmware' && /^[a-zA-Z0-9]{1,64}$/.test(path[1]) ? path[1] : null;
}

const coapJson = (code: string, body: unknown): CoapResponse => ({
  code,
  options: [{ name: 'Content-Format', value: encodeUint(ContentFormat.json) }],
  payload: Buffer.from(JSON.stringify(body)),
});

/**
 * CoAP `GET /firmware/<hashId>`: the image as one response that the endpoint's blockwise layer
 * (src/coap/endpoint.ts) cuts into the Block2 blocks the device asks for, any size 16..1024 and
 * from any block on, with Size2 and ETag = the first 8 bytes of the image's sha256. A request
 * carrying that ETag gets 2.03 Valid without the image.
 */
export async function serveFirmwareOverCoap(ctx: AppContext, device: FirmwareDevice, hashId: string, req: CoapRequest): Promise<CoapResponse> {
  touchDevice(ctx, device);
  const meta = await readFirmwareRange(ctx, device, hashId, 0, 0);
  if (meta.status === 'not_found') return coapJson('4.04', { key: 'not_found_error', message: meta.message });
  if (meta.status === 'forbidden') return coapJson('4.03', { key: 'right_error', message: meta.message });
  const etag = Buffer.from(meta.firmware.sha256, 'hex').subarray(0, 8);
  if (req.options.some((o) => o.name === 'ETag' && o.value.equals(etag))) return { code: '2.03', options: [{ name: 'ETag', value: etag }] };
  const read = await readFirmwareRange(ctx, device, hashId, 0, meta.firmware.size);
  if (read.status !== 'ok') return coapJson('4.04', { key: 'not_found_error', message: `firmware ${hashId} not found` });
  return {
    code: '2.05',
    options: [
      { name: 'Content-Format', value: encodeUint(ContentFormat.octetStream) },
      { name: 'ETag', value: etag },
      { name: 'Size2', value: encodeUint(read.firmware.size) },
    ],
    payload: read.bytes,
  };
}

/**
 * The elective option (experimental range, RFC 7252 §12.2) a CoAP answer carries each firmware
 * offer in: the text of one `x-firmware` reference, repeated once per offer.
 */
export const COAP_FIRMWARE_OPTION = 65000;

/** The CoAP options for the `x-firmware` offers of an answer's headers (none when there are none). */
export function firmwareOfferOptions(headers: Record<string, string>): CoapOption[] {
  const value = headers[FIRMWARE_OFFER_HEADER];
  if (!value) return [];
  // a reference holds no ", ": its version is percent-encoded
  return value.split(', ').map((reference) => ({ name: String(COAP_FIRMWARE_OPTION), value: Buffer.from(reference) }));
}
