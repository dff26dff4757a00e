import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { ImageCache } from '../../src/gateway/firmware.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { DtlsCoapPeer, run } from '../coap/support.ts';
import { opensslPsk } from '../support/openssl.ts';
import { until } from '../support/until.ts';
import { connectivityClient, pskDevice, type RestClient } from '../support/provision.ts';

// A handler that offers the firmware images the device names in its report, and answers with its own header and body.
// A reportLate event offers firmware too: that run has no answer to carry it.
const HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type === 'reportLate') { exec.offerFirmware('anyimage'); return; }
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  const expectIn = body !== undefined && body.type === 'json' ? (body.data as { expectIn?: number }).expectIn : undefined;
  if (expectIn !== undefined) exec.expectNextReportBefore(new Date(Date.now() + expectIn));
  const offer = body !== undefined && body.type === 'json' ? ((body.data as { offer?: string[] }).offer ?? []) : [];
  offer.forEach((id) => exec.offerFirmware(id));
  return { statusCode: 200, headers: { 'x-own': 'kept' }, body: { ok: true } };
}`;

interface Device {
  hashId: string;
  identity: string;
  key: Buffer;
}
interface Response {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

const CACHE_BYTES = 200_000;
let ctx: AppContext;
let service: RunningService;
let port: number;
let api: RestClient;
let other: RestClient;
let d1: Device; // device type T1
let d2: Device; // device type T2, same environment
let dB: Device; // another environment
const small = randomBytes(50_000); // cached whole (below half of FIRMWARE_CACHE_BYTES)
const big = randomBytes(300_000); // read range by range from PostgreSQL
const f: Record<'small' | 'big' | 'ofT2', string> = { small: '', big: '', ofT2: '' };
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Requests over one TLS 1.2 PSK connection (node:tls, i.e. OpenSSL as the device), answers as raw bytes. */
function deviceRequests(device: Device, requests: { method?: string; path: string; headers?: Record<string, string>; body?: string }[]): Promise<Response[]> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      ciphers: 'PSK-AES128-GCM-SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: device.key, identity: device.identity }),
    });
    const chunks: Buffer[] = [];
    socket.on('secureConnect', () => {
      socket.write(
        requests
          .map((r, i) => {
            const head = [`${r.method ?? 'GET'} ${r.path} HTTP/1.1`, 'Host: device.test', ...Object.entries(r.headers ?? {}).map(([k, v]) => `${k}: ${v}`)];
            if (r.body !== undefined) head.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(r.body)}`);
            if (i === requests.length - 1) head.push('Connection: close');
            return `${head.join('\r\n')}\r\n\r\n${r.body ?? ''}`;
          })
          .join(''),
      );
    });
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks);
      const out: Response[] = [];
      let at = 0;
      while (at < raw.length) {
        const end = raw.indexOf('\r\n\r\n', at);
        if (end < 0) break;
        const [statusLine, ...lines] = raw.subarray(at, end).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const l of lines) headers[l.slice(0, l.indexOf(':')).trim().toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
        const status = Number(statusLine.split(' ')[1]);
        // a HEAD and a 304 carry no body whatever Content-Length says
        const bodyless = requests[out.length]?.method === 'HEAD' || status === 304;
        const length = bodyless ? 0 : Number(headers['content-length'] ?? 0);
        out.push({ status, headers, body: raw.subarray(end + 4, end + 4 + length) });
        at = end + 4 + length;
      }
      resolve(out);
    });
  });
}
const one = async (device: Device, path: string, headers?: Record<string, string>, method?: string) =>
  (await deviceRequests(device, [{ path, headers, method }]))[0];

async function activitiesOf(client: RestClient, device: Device) {
  const rows = (await client.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${device.hashId}&rowsPerPage=100`))
    .body.rows;
  return Promise.all(rows.map(async (r) => (await client.request<{ activity: Run }>('GET', `/supplier-activity/${r.activity.hashId}`)).body.activity));
}

// no SDK release knows an offerFirmware activity: each offer is a line of the run's log, `offerFirmware(<hashId>): ...`
interface Run {
  log: { type: string; message: string }[];
  triggerData: { request: { response: { headers: Record<string, string> } } };
  activities: { triggerType: string }[];
}
const offerLines = (run: Run) => run.log.filter((l) => l.message.startsWith('offerFirmware('));

beforeAll(async () => {
  ctx = await testContext({ FIRMWARE_CACHE_BYTES: String(CACHE_BYTES) });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  const base = `http://127.0.0.1:${service.apiPort()}`;
  api = await connectivityClient(ctx.db, base);
  other = await connectivityClient(ctx.db, base);
  [d1, d2, dB] = await Promise.all([pskDevice(api, HANDLER), pskDevice(api, HANDLER), pskDevice(other, HANDLER)]);
  const typeOf = async (client: RestClient, d: Device) =>
    (await client.request<{ device: { deviceTypeHashId: string } }>('GET', `/device/${d.hashId}`)).body.device.deviceTypeHashId;
  const add = async (client: RestClient, type: string, version: string, image: Buffer) => {
    const r = await client.request<{ hashId: string }>('POST', '/firmware/', { deviceTypeHashId: type, version, data: image.toString('base64') });
    expect(r.status).toBe(200);
    return r.body.hashId;
  };
  const [t1, t2] = await Promise.all([typeOf(api, d1), typeOf(api, d2)]);
  f.small = await add(api, t1, '1.0.0', small);
  f.big = await add(api, t1, '2.0 "beta"', big);
  f.ofT2 = await add(api, t2, '1.0.0', randomBytes(1000));
});

afterAll(async () => {
  await service?.stop();
  await closeContext(ctx);
});

describe('exec.offerFirmware', () => {
  it("adds an x-firmware reference to the answer, leaving the handler's headers and body alone, and shows it on the activity", async () => {
    const [res] = await deviceRequests(d1, [{ method: 'POST', path: '/report', body: JSON.stringify({ offer: [f.small, f.big] }) }]);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body.toString())).toEqual({ ok: true });
    expect(res.headers['x-own']).toBe('kept');
    expect(res.headers['x-firmware']).toBe(
      `/firmware/${f.small}; sha256=${sha256(small)}; size=${small.length}; version=1.0.0, ` +
        `/firmware/${f.big}; sha256=${sha256(big)}; size=${big.length}; version=${encodeURIComponent('2.0 "beta"')}`,
    );
    const activity = (await activitiesOf(api, d1)).find((a) => offerLines(a).length > 0);
    expect(activity?.triggerData.request.response.headers['x-firmware']).toBe(res.headers['x-firmware']);
    expect(activity?.activities).toEqual([]);
    expect(offerLines(activity!)).toEqual([
      { type: 'log', message: `offerFirmware(${f.small}): x-firmware: /firmware/${f.small}; sha256=${sha256(small)}; size=${small.length}; version=1.0.0` },
      { type: 'log', message: expect.stringMatching(new RegExp(`^offerFirmware\\(${f.big}\\): x-firmware: /firmware/${f.big}; sha256=`)) },
    ]);
  });

  it("fails, visibly on the activity, an offer of another device type's or another environment's image, and offers nothing", async () => {
    const [res] = await deviceRequests(d1, [{ method: 'POST', path: '/report', body: JSON.stringify({ offer: [f.ofT2, 'nosuchimage'] }) }]);
    expect(res.status).toBe(200);
    expect(res.headers['x-firmware']).toBeUndefined();
    const [fromB] = await deviceRequests(dB, [{ method: 'POST', path: '/report', body: JSON.stringify({ offer: [f.small] }) }]);
    expect(fromB.headers['x-firmware']).toBeUndefined();

    const failed = (await activitiesOf(api, d1)).flatMap(offerLines).filter((l) => l.type === 'error');
    expect(failed.map((l) => l.message)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(new RegExp(`^offerFirmware\\(${f.ofT2}\\): firmware ${f.ofT2} is for device type \\w+, not for this device's type`)),
        'offerFirmware(nosuchimage): firmware nosuchimage does not exist in this environment',
      ]),
    );
    const ofB = (await activitiesOf(other, dB)).flatMap(offerLines);
    expect(ofB).toEqual([{ type: 'error', message: `offerFirmware(${f.small}): firmware ${f.small} does not exist in this environment` }]);
  });
});

describe('exec.offerFirmware in a run for an event', () => {
  it('fails visibly: only the answer to a device request can carry an offer', async () => {
    const late = await pskDevice(api, HANDLER);
    const [res] = await deviceRequests(late, [{ method: 'POST', path: '/report', body: JSON.stringify({ expectIn: 200 }) }]);
    expect(res.status).toBe(200);
    let offer: { type: string; message: string } | undefined;
    for (let i = 0; i < 100 && !offer; i++) {
      await new Promise((r) => setTimeout(r, 100));
      offer = (await activitiesOf(api, late)).flatMap(offerLines)[0];
    }
    expect(offer).toEqual({
      type: 'error',
      message: 'offerFirmware(anyimage): not offered: only the answer to a device request can carry firmware; this event has none',
    });
  });
});

describe('device download over HTTPS (TLS-PSK)', () => {
  it('serves the whole image with its ETag, and ranges of it (206) that resume to the same bytes', async () => {
    for (const [hashId, image] of [
      [f.small, small],
      [f.big, big],
    ] as const) {
      const whole = await one(d1, `/firmware/${hashId}`);
      expect(whole.status).toBe(200);
      expect(whole.headers).toMatchObject({
        etag: `"${sha256(image)}"`,
        'accept-ranges': 'bytes',
        'content-type': 'application/octet-stream',
        'content-length': String(image.length),
      });
      expect(sha256(whole.body)).toBe(sha256(image));

      // a download resumed piece by piece on one connection
      const pieces = [];
      for (let start = 0; start < image.length; start += 65_536)
        pieces.push({
          path: `/firmware/${hashId}`,
          headers: { Range: `bytes=${start}-${Math.min(start + 65_535, image.length - 1)}`, 'If-Range': `"${sha256(image)}"` },
        });
      const parts = await deviceRequests(d1, pieces);
      expect(parts.map((p) => p.status)).toEqual(pieces.map(() => 206));
      expect(parts[0].headers['content-range']).toBe(`bytes 0-${Math.min(65_535, image.length - 1)}/${image.length}`);
      expect(sha256(Buffer.concat(parts.map((p) => p.body)))).toBe(sha256(image));
    }
  });

  it("moves the device's lastOnlineAt as a contact: the first request at once, the later ones of its second together, the latest of them", async () => {
    const type = (await api.request<{ device: { deviceTypeHashId: string } }>('GET', `/device/${d1.hashId}`)).body.device.deviceTypeHashId;
    const identity = `dl-${randomBytes(6).toString('hex')}`;
    const key = randomBytes(16);
    const added = await api.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: identity,
      deviceTypeHashId: type,
      psk: key.toString('hex'),
      pskIdentity: identity,
    });
    expect(added.status).toBe(200);
    const device = { hashId: added.body.hashId, identity, key };
    const lastOnline = async () =>
      (await ctx.db.query<{ at: Date | null }>('SELECT last_online_at AS at FROM device WHERE hash_id = $1', [device.hashId])).rows[0].at?.getTime() ?? null;
    expect(await lastOnline()).toBeNull();

    const asked = Date.now();
    expect((await one(device, `/firmware/${f.small}`, { Range: 'bytes=0-99' })).status).toBe(206);
    const first = (await until(lastOnline, (at) => at !== null, 'the first contact written'))!;
    expect(first).toBeGreaterThanOrEqual(asked - 1000);
    // five more ranges on a new connection, inside the first one's second: not a write each
    const more = await deviceRequests(
      device,
      Array.from({ length: 5 }, (_, i) => ({ path: `/firmware/${f.small}`, headers: { Range: `bytes=${(i + 1) * 100}-${(i + 1) * 100 + 99}` } })),
    );
    expect(more.map((r) => r.status)).toEqual([206, 206, 206, 206, 206]);
    const answered = Date.now();
    // (on a machine so slow that the second has passed, they are written at once, as they should be)
    if (answered - first < 800) expect(await lastOnline()).toBe(first);
    // once the second has passed: one write, of the latest
    const latest = (await until(lastOnline, (at) => at! > first, 'the later contacts written'))!;
    expect(latest).toBeLessThanOrEqual(answered);
  });

  it('answers open and suffix ranges, 416 for unsatisfiable or malformed ones, 304 for If-None-Match, and HEAD', async () => {
    const size = small.length;
    const [open, suffix, beyond, inverted, malformed, twoRanges, otherUnit, notModified, staleIfRange, head] = await deviceRequests(d1, [
      { path: `/firmware/${f.small}`, headers: { Range: 'bytes=49000-' } },
      { path: `/firmware/${f.small}`, headers: { Range: 'bytes=-10' } },
      { path: `/firmware/${f.small}`, headers: { Range: `bytes=${size}-` } },
      { path: `/firmware/${f.small}`, headers: { Range: 'bytes=20-10' } },
      { path: `/firmware/${f.small}`, headers: { Range: 'bytes=abc' } },
      { path: `/firmware/${f.small}`, headers: { Range: 'bytes=0-1,5-6' } },
      { path: `/firmware/${f.small}`, headers: { Range: 'pages=1-2' } },
      { path: `/firmware/${f.small}`, headers: { 'If-None-Match': `"other", "${sha256(small)}"` } },
      { path: `/firmware/${f.small}`, headers: { Range: 'bytes=0-9', 'If-Range': '"an-older-image"' } },
      { path: `/firmware/${f.small}`, method: 'HEAD' },
    ]);
    expect(open.status).toBe(206);
    expect(open.headers['content-range']).toBe(`bytes 49000-${size - 1}/${size}`);
    expect(open.body.equals(small.subarray(49000))).toBe(true);
    expect(suffix.status).toBe(206);
    expect(suffix.body.equals(small.subarray(size - 10))).toBe(true);
    for (const bad of [beyond, inverted, malformed, twoRanges]) {
      expect(bad.status).toBe(416);
      expect(bad.headers['content-range']).toBe(`bytes */${size}`);
      expect(JSON.parse(bad.body.toString()).key).toBe('parameter_error');
    }
    expect(otherUnit.status).toBe(200);
    expect(otherUnit.body.length).toBe(size);
    expect(notModified.status).toBe(304);
    expect(notModified.headers.etag).toBe(`"${sha256(small)}"`);
    expect(staleIfRange.status).toBe(200);
    expect(staleIfRange.body.length).toBe(size);
    expect(head.status).toBe(200);
    expect(head.headers['content-length']).toBe(String(size));
  });

  it('works for openssl s_client with PSK-AES128-CCM8 as the device', async () => {
    const out = await opensslPsk({
      port,
      identity: d1.identity,
      keyHex: d1.key.toString('hex'),
      cipher: 'PSK-AES128-CCM8:@SECLEVEL=0',
      input: `GET /firmware/${f.small} HTTP/1.1\r\nHost: gw\r\nRange: bytes=100-199\r\nConnection: close\r\n\r\n`,
    });
    const raw = Buffer.from(out.stdout, 'latin1');
    const body = raw.subarray(raw.indexOf('\r\n\r\n') + 4);
    expect(out.stdout).toMatch(/^HTTP\/1\.1 206/);
    expect(body.equals(small.subarray(100, 200))).toBe(true);
  });

  it("refuses another device type's device (403) and another environment's (404), runs no handler and queues nothing", async () => {
    const before = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM supplier_activity');
    const wrongType = await one(d2, `/firmware/${f.small}`);
    expect(wrongType.status).toBe(403);
    expect(JSON.parse(wrongType.body.toString())).toEqual({ key: 'right_error', message: expect.stringContaining(f.small) });
    const own = await one(d2, `/firmware/${f.ofT2}`);
    expect(own.status).toBe(200);
    const otherEnv = await one(dB, `/firmware/${f.small}`);
    expect(otherEnv.status).toBe(404);
    expect(JSON.parse(otherEnv.body.toString()).key).toBe('not_found_error');
    expect((await one(d1, '/firmware/nosuchimage')).status).toBe(404);
    const after = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM supplier_activity');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('serves an image of the default size limit (8 MiB) whole', async () => {
    const type = (await api.request<{ device: { deviceTypeHashId: string } }>('GET', `/device/${d1.hashId}`)).body.device.deviceTypeHashId;
    const image = randomBytes(ctx.config.firmwareMaxBytes);
    expect(image.length).toBe(8 * 1024 * 1024);
    const added = await api.request<{ hashId: string }>('POST', '/firmware/', { deviceTypeHashId: type, version: 'full-size', data: image.toString('base64') });
    expect(added.status).toBe(200);
    const got = await one(d1, `/firmware/${added.body.hashId}`);
    expect(got.status).toBe(200);
    expect(got.body.length).toBe(image.length);
    expect(sha256(got.body)).toBe(sha256(image));
  });

  it('stops serving a deleted image', async () => {
    const type = (await api.request<{ device: { deviceTypeHashId: string } }>('GET', `/device/${d1.hashId}`)).body.device.deviceTypeHashId;
    const image = randomBytes(500);
    const added = await api.request<{ hashId: string }>('POST', '/firmware/', {
      deviceTypeHashId: type,
      version: 'short-lived',
      data: image.toString('base64'),
    });
    expect((await one(d1, `/firmware/${added.body.hashId}`)).body.equals(image)).toBe(true);
    expect((await api.request('DELETE', `/firmware/${added.body.hashId}`)).status).toBe(204);
    // metadata is cached for at most 2 s
    await new Promise((r) => setTimeout(r, 2100));
    expect((await one(d1, `/firmware/${added.body.hashId}`)).status).toBe(404);
  });
});

describe('device download over CoAP (DTLS PSK, Block2)', () => {
  // libcoap's -k takes the key as text: these devices get ASCII keys
  const coapDevice = async (type: string) => {
    const identity = `coapfw-${randomBytes(4).toString('hex')}`;
    const key = randomBytes(8).toString('hex');
    const r = await api.request<{ hashId: string }>('POST', '/device/psk', {
      supplierDeviceIdentifier: identity,
      deviceTypeHashId: type,
      psk: Buffer.from(key).toString('hex'),
      pskIdentity: identity,
    });
    expect(r.status).toBe(200);
    return { hashId: r.body.hashId, identity, key };
  };
  const image = randomBytes(5000);
  let fw = '';
  let c1: { hashId: string; identity: string; key: string };
  let c2: { hashId: string; identity: string; key: string };
  const outDir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-fw-'));
  const coapGet = async (device: { identity: string; key: string }, uri: string, args: string[]) => {
    const out = path.join(outDir, `${randomBytes(4).toString('hex')}.bin`);
    const res = await run(
      'coap-client-openssl',
      ['-B', '20', '-u', device.identity, '-k', device.key, ...args, '-o', out, `coaps://127.0.0.1:${service.coap!.coapsPort()}${uri}`],
      60_000,
    );
    let bytes = Buffer.alloc(0);
    try {
      bytes = readFileSync(out);
    } catch {
      /* nothing written */
    }
    return { ...res, bytes };
  };

  beforeAll(async () => {
    const typeOf = async (d: Device) =>
      (await api.request<{ device: { deviceTypeHashId: string } }>('GET', `/device/${d.hashId}`)).body.device.deviceTypeHashId;
    const [t1, t2] = await Promise.all([typeOf(d1), typeOf(d2)]);
    [c1, c2] = await Promise.all([coapDevice(t1), coapDevice(t2)]);
    const r = await api.request<{ hashId: string }>('POST', '/firmware/', { deviceTypeHashId: t1, version: 'coap-1', data: image.toString('base64') });
    fw = r.body.hashId;
  });

  it.each([16, 32, 64, 128, 256, 512, 1024])('coap-client-openssl -b %i fetches the image byte for byte', async (size) => {
    const res = await coapGet(c1, `/firmware/${fw}`, ['-b', String(size)]);
    expect(sha256(res.bytes)).toBe(sha256(image));
  });

  it('serves any block first (coap-client-openssl -b num,size: a resumed download) and an image read range by range from PostgreSQL', async () => {
    // with a block number libcoap asks for just that block: its bytes are the image's from num * size (312 × 16 is the short last one)
    for (const [num, size] of [
      [37, 64],
      [2, 1024],
      [312, 16],
    ]) {
      const resumed = await coapGet(c1, `/firmware/${fw}`, ['-b', `${num},${size}`]);
      expect({ num, size, length: resumed.bytes.length, same: resumed.bytes.equals(image.subarray(num * size, (num + 1) * size)) }).toEqual({
        num,
        size,
        length: Math.min(size, image.length - num * size),
        same: true,
      });
    }
    const whole = await coapGet(c1, `/firmware/${f.big}`, ['-b', '1024']);
    expect(sha256(whole.bytes)).toBe(sha256(big));
  });

  it('answers each block with Block2, Size2 and the ETag (sha256 prefix); 2.03 for a known ETag; 4.03 for another device type, 4.04 for unknown', async () => {
    const peer = await DtlsCoapPeer.connect(service.coap!.coapsPort(), c1.identity, Buffer.from(c1.key));
    const other = await DtlsCoapPeer.connect(service.coap!.coapsPort(), c2.identity, Buffer.from(c2.key));
    try {
      const etag = Buffer.from(sha256(image), 'hex').subarray(0, 8);
      const get = (p: DtlsCoapPeer, messageId: number, options: { name: string; value: Buffer }[]) =>
        p.request({ confirmable: true, code: 'GET', messageId, token: Buffer.from([messageId]), options });
      // block 5 of 32 bytes, asked first (a resumed download)
      get(peer, 1, [
        { name: 'Uri-Path', value: Buffer.from('firmware') },
        { name: 'Uri-Path', value: Buffer.from(fw) },
        { name: 'Block2', value: Buffer.from([5 * 16 + 1]) },
      ]);
      get(peer, 2, [
        { name: 'Uri-Path', value: Buffer.from('firmware') },
        { name: 'Uri-Path', value: Buffer.from(fw) },
        { name: 'ETag', value: etag },
      ]);
      get(peer, 3, [
        { name: 'Uri-Path', value: Buffer.from('firmware') },
        { name: 'Uri-Path', value: Buffer.from('nosuchimage') },
      ]);
      get(other, 4, [
        { name: 'Uri-Path', value: Buffer.from('firmware') },
        { name: 'Uri-Path', value: Buffer.from(fw) },
      ]);
      await peer.waitFor(3);
      await other.waitFor(1);
      const byToken = (list: typeof peer.received, t: number) => list.find((m) => m.token[0] === t)!;
      const opt = (m: (typeof peer.received)[number], name: string) => m.options.find((o) => o.name === name)?.value;
      const block = byToken(peer.received, 1);
      expect(block.code).toBe('2.05');
      expect(block.payload.equals(image.subarray(160, 192))).toBe(true);
      expect(opt(block, 'Block2')).toEqual(Buffer.from([5 * 16 + 8 + 1]));
      expect(opt(block, 'Size2')?.readUIntBE(0, opt(block, 'Size2')!.length)).toBe(image.length);
      expect(opt(block, 'ETag')).toEqual(etag);
      const valid = byToken(peer.received, 2);
      expect(valid.code).toBe('2.03');
      expect(valid.payload.length).toBe(0);
      expect(byToken(peer.received, 3).code).toBe('4.04');
      const refused = byToken(other.received, 4);
      expect(refused.code).toBe('4.03');
      expect(JSON.parse(refused.payload.toString()).key).toBe('right_error');
    } finally {
      peer.close();
      other.close();
    }
  });

  it('carries the offer of exec.offerFirmware in the CoAP answer as option 65000', async () => {
    const peer = await DtlsCoapPeer.connect(service.coap!.coapsPort(), c1.identity, Buffer.from(c1.key));
    try {
      peer.request({
        confirmable: true,
        code: 'POST',
        messageId: 9,
        token: Buffer.from([9]),
        options: [
          { name: 'Uri-Path', value: Buffer.from('report') },
          { name: 'Content-Format', value: Buffer.from([50]) },
        ],
        payload: Buffer.from(JSON.stringify({ offer: [fw, f.small] })),
      });
      const [answer] = await peer.waitFor(1);
      expect(answer.code).toBe('2.05');
      expect(JSON.parse(answer.payload.toString())).toEqual({ ok: true });
      expect(answer.options.filter((o) => String(o.name) === '65000').map((o) => o.value.toString())).toEqual([
        `/firmware/${fw}; sha256=${sha256(image)}; size=${image.length}; version=coap-1`,
        `/firmware/${f.small}; sha256=${sha256(small)}; size=${small.length}; version=1.0.0`,
      ]);
    } finally {
      peer.close();
    }
  });
});

describe("the gateway's image cache", () => {
  it('keeps whole images by sha256 within its byte budget, least recently used out, and never caches one over half of it', async () => {
    const cache = new ImageCache(100);
    const loads: string[] = [];
    const get = (sha: string) =>
      cache.get(sha, 40, async () => {
        loads.push(sha);
        return Buffer.alloc(40);
      });
    await get('a');
    await get('b');
    await get('a'); // a hit: a is now the most recently used
    await get('c'); // 120 > 100: b goes
    await get('a');
    await get('b');
    expect(loads).toEqual(['a', 'b', 'c', 'b']);
    expect(cache.fits(50)).toBe(true);
    expect(cache.fits(51)).toBe(false);
    // a failed load is not kept
    await expect(
      cache.get('d', 10, async () => {
        throw new Error('gone');
      }),
    ).rejects.toThrow('gone');
    await cache.get('d', 10, async () => {
      loads.push('d');
      return Buffer.alloc(10);
    });
    expect(loads.at(-1)).toBe('d');
  });
});
