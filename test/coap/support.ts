/** CoAP end-to-end set-up: the service on real PostgreSQL/Redis, a PSK device with a reporting handler, real clients. */
import { execFileSync, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generate, parse } from 'coap-packet';
import type { Packet, ParsedPacket } from 'coap-packet';
import { dtls } from 'node-dtls-client';
import { expect } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient, type RestClient } from '../support/provision.ts';

const PARSER = `
function handle(args: { payload: string }, exec: Exec) {
  const data = JSON.parse(args.payload) as { t: number; v: number };
  return {
    generatedAt: new Date(data.t),
    measurements: [{ channelIndex: 0, quantityHashId: QUANTITY, generatedAt: new Date(data.t), orderOfMagnitude: -3, significand: data.v * 1000 }],
  };
}`;

/** The device type's event handler: reports are parsed; /big, /echo, /slow, /slowbig and /hex answer what their names say. */
const HANDLER = `
const REPORT_TYPE = "__REPORT_TYPE__";
function handle(args: ArgumentsForIncomingRequestEvent, exec: Exec): IncomingRequestResponse;
function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const r = args.event.webRequest;
  const data = r.body !== undefined && r.body.type === 'json' ? r.body.data as { m?: string } : {};
  exec.addLog(r.url.protocol + ' ' + r.method + ' ' + r.url.path + ' from ' + (r.pskIdentity ?? '?') + ' ' + JSON.stringify(r.url.query) + ' m=' + (data.m ?? ''));
  if (r.url.path === '/slow' || r.url.path === '/slowbig') { const end = Date.now() + __SLOW_MS__; while (Date.now() < end) { /* slower than the piggyback window */ } }
  if (r.url.path === '/big' || r.url.path === '/slowbig') {
    let s = '';
    for (let i = 0; i < 60; i++) s += 'line ' + String(i).padStart(4, '0') + ' of the large answer\\n';
    return { statusCode: 200, body: { type: 'string', data: s } };
  }
  if (r.url.path === '/echo') {
    return { statusCode: 201, body: { protocol: r.url.protocol, method: r.method, path: r.url.path, query: r.url.query, headers: r.headers, body: r.body ?? null, pskIdentity: r.pskIdentity ?? null, ip: r.ip, certificate: r.certificate } };
  }
  if (r.url.path === '/hex') return { statusCode: 200, body: { type: 'hex', data: 'deadbeef' } };
  if (r.url.path === '/missing') return { statusCode: 404, body: ['not_found_error', 'no such thing'] };
  if (r.body === undefined || r.body.type !== 'json') return { statusCode: 400, body: ['parameter_error', 'POST JSON'] };
  exec.parseReport({ reportTypeHashId: REPORT_TYPE, payload: JSON.stringify(r.body.data) });
  return { statusCode: 200, body: { ok: true, device: args.device.supplierDeviceIdentifier, m: data.m ?? null } };
}`;

export const BIG_ANSWER = Array.from({ length: 60 }, (_, i) => `line ${String(i).padStart(4, '0')} of the large answer\n`).join('');

export interface CoapWorld {
  ctx: AppContext;
  service: RunningService;
  api: RestClient;
  /** the PSK is ASCII so libcoap's `-k` can carry it */
  device: { hashId: string; identity: string; key: string; keyHex: string };
  /** the device type of `device`, its handler the one above */
  deviceTypeHashId: string;
  /** the report type the handler parses reports with (`{ t, v }`: one measurement of v at time t) */
  reportTypeHashId: string;
  coapsPort: number;
  /** another device type with the same handler, and a PSK device of it */
  newDevice(): Promise<{ hashId: string; identity: string; key: string; typeHashId: string }>;
  close(): Promise<void>;
}

/**
 * Starts the whole service (`all`; `prepare` may adjust its context first) and provisions a quantity, a report type, a device type and a PSK device.
 * The handler's /slow and /slowbig take COAP_PIGGYBACK_MS + 400 ms, or `slowMs`.
 */
export async function startCoapWorld(
  overrides: Record<string, string> = {},
  identity = `coap-${randomBytes(4).toString('hex')}`,
  prepare?: (ctx: AppContext) => void,
  slowMs?: number,
): Promise<CoapWorld> {
  const settings = { SANDBOX_TIMEOUT_MS: '2000', DEVICE_BODY_LIMIT_BYTES: '4096', COAP_PIGGYBACK_MS: '300', ...overrides };
  slowMs ??= Number(settings.COAP_PIGGYBACK_MS) + 400;
  const ctx = await testContext(settings);
  prepare?.(ctx);
  const service = await startService(ctx, ['all']);
  const api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
  const quantity = await api.request('POST', '/quantity/', { name: 'Voltage', unit: 'V', defaultOrderOfMagnitude: -3 });
  const reportType = await api.request('POST', '/supplier-report-type/', {
    name: 'Voltage report',
    fieldConfigurations: { pinGroup: [], pin: [], measurement: [] },
    parser: `const QUANTITY = "${quantity.body.hashId}";\n${PARSER}`,
  });
  expect(reportType.status).toBe(200);
  const deviceType = await api.request('POST', '/device-type/', {
    name: 'CoAP logger',
    eventHandler: HANDLER.replace('__REPORT_TYPE__', reportType.body.hashId).replace('__SLOW_MS__', String(slowMs)),
    fieldConfigurations: [],
    pinGroupFieldConfigurations: [],
    channels: [{ name: 'Voltage', pinFieldConfigurations: [], defaultPinName: 'V', charts: [] }],
    commandTypeHashIds: [],
  });
  expect(deviceType.status).toBe(200);
  const newDevice = async () => {
    const type = await api.request('POST', '/device-type/', {
      name: 'CoAP logger',
      eventHandler: HANDLER.replace('__REPORT_TYPE__', reportType.body.hashId).replace('__SLOW_MS__', String(slowMs)),
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [{ name: 'Voltage', pinFieldConfigurations: [], defaultPinName: 'V', charts: [] }],
      commandTypeHashIds: [],
    });
    expect(type.status).toBe(200);
    const id = `coap-${randomBytes(4).toString('hex')}`;
    const k = randomBytes(8).toString('hex');
    const device = await api.request('POST', '/device/psk', {
      supplierDeviceIdentifier: id,
      deviceTypeHashId: type.body.hashId,
      psk: Buffer.from(k).toString('hex'),
      pskIdentity: id,
    });
    expect(device.status).toBe(200);
    return { hashId: device.body.hashId, identity: id, key: k, typeHashId: type.body.hashId };
  };
  const key = randomBytes(8).toString('hex');
  const keyHex = Buffer.from(key, 'ascii').toString('hex');
  const added = await api.request('POST', '/device/psk', {
    supplierDeviceIdentifier: identity,
    deviceTypeHashId: deviceType.body.hashId,
    psk: keyHex,
    pskIdentity: identity,
  });
  expect(added.status).toBe(200);
  return {
    ctx,
    service,
    api,
    device: { hashId: added.body.hashId, identity, key, keyHex },
    deviceTypeHashId: deviceType.body.hashId,
    reportTypeHashId: reportType.body.hashId,
    coapsPort: service.coap!.coapsPort(),
    newDevice,
    async close() {
      await service.stop();
      await closeContext(ctx);
    },
  };
}

export const marker = () => `m${randomBytes(5).toString('hex')}`;

/** A report body with a unique generation time, so its measurement can be found. */
export function report(v: number): { body: string; t: number; m: string } {
  const t = Date.parse('2026-11-01T00:00:00Z') + Math.floor(Math.random() * 1e9);
  const m = marker();
  return { body: JSON.stringify({ t, v, m }), t, m };
}

/** The measurements stored for the device (the world's PSK device unless another is named) at generation time `t`. */
export async function storedAt(world: CoapWorld, t: number, deviceHashId = world.device.hashId): Promise<number[]> {
  const { rows } = await world.ctx.db.query<{ significand: number }>(
    'SELECT m.significand FROM measurement m JOIN device d ON d.id = m.device_id WHERE d.hash_id = $1 AND m.generated_at = $2',
    [deviceHashId, new Date(t)],
  );
  return rows.map((r) => r.significand);
}

export interface ActivityDetails {
  hashId: string;
  triggerType: string;
  failed: boolean;
  log: { type: string; message: string }[];
  activities: { triggerType: string; failed: boolean }[];
}

/** The handler runs (newest first, up to 50) whose log contains `text`. */
export async function runsLogging(api: RestClient, text: string): Promise<ActivityDetails[]> {
  const list = await api.request<{ rows: { activity: { hashId: string; triggerType: string } }[] }>('GET', '/supplier-activity/?rowsPerPage=50');
  expect(list.status).toBe(200);
  const runs = list.body.rows.filter((r) => r.activity.triggerType === 'handleIncomingRequest');
  const details = await Promise.all(
    runs.map(async (r) => (await api.request<{ activity: ActivityDetails }>('GET', `/supplier-activity/${r.activity.hashId}`)).body.activity),
  );
  return details.filter((a) => a.log.some((l) => l.message.includes(text)));
}

export interface ProcessResult {
  stdout: string;
  stderr: string;
  code: number | null;
}

export function run(bin: string, args: string[], timeoutMs = 20_000): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString('latin1');
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
  });
}

/** libcoap's coap-client over DTLS PSK (`-u`/`-k`), `-B` bounding the wait. */
export function coapClient(bin: 'coap-client-openssl' | 'coap-client-gnutls', world: CoapWorld, uri: string, args: string[]): Promise<ProcessResult> {
  return run(bin, ['-B', '15', '-u', world.device.identity, '-k', world.device.key, ...args, `coaps://127.0.0.1:${world.coapsPort}${uri}`]);
}

let mbedtlsBinary: string | null = null;

/** Compiles test/support/mbedtls-coap-client.c against libmbedtls-dev; fails with a clear message when it cannot. */
export function mbedtlsClient(): string {
  if (mbedtlsBinary) return mbedtlsBinary;
  const source = path.resolve(import.meta.dirname, '../support/mbedtls-coap-client.c');
  if (!existsSync('/usr/include/mbedtls/ssl.h')) throw new Error('mbedTLS headers missing: install libmbedtls-dev (apt-get install libmbedtls-dev gcc)');
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'mbedtls-coap-')), 'mbedtls-coap-client');
  try {
    execFileSync('gcc', ['-O1', '-Wall', '-o', out, source, '-lmbedtls', '-lmbedx509', '-lmbedcrypto'], { stdio: 'pipe' });
  } catch (err) {
    const e = err as { code?: string; stderr?: Buffer };
    if (e.code === 'ENOENT') throw new Error('gcc missing: install gcc and libmbedtls-dev to build the mbedTLS CoAP client', { cause: err });
    throw new Error(`building the mbedTLS CoAP client failed: ${e.stderr?.toString() ?? String(err)}`, { cause: err });
  }
  mbedtlsBinary = out;
  return out;
}

/** A DTLS PSK session from node-dtls-client carrying hand-built CoAP messages; received messages are queued. */
export class DtlsCoapPeer {
  readonly received: ParsedPacket[] = [];
  readonly raw: Buffer[] = [];
  #socket: ReturnType<typeof dtls.createSocket> | null = null;

  static async connect(port: number, identity: string, key: Buffer, cipher: string = 'TLS_PSK_WITH_AES_128_CCM_8'): Promise<DtlsCoapPeer> {
    const peer = new DtlsCoapPeer();
    await new Promise<void>((resolve, reject) => {
      const socket = dtls.createSocket({ type: 'udp4', address: '127.0.0.1', port, psk: { [identity]: key }, timeout: 5000, ciphers: [cipher as never] });
      peer.#socket = socket;
      socket.on('connected', () => resolve());
      socket.on('error', reject);
      socket.on('message', (m: Buffer) => {
        peer.raw.push(m);
        try {
          peer.received.push(parse(m));
        } catch {
          // kept raw only
        }
      });
    });
    return peer;
  }

  send(datagram: Buffer): void {
    this.#socket!.send(datagram);
  }

  request(p: Packet): Buffer {
    const datagram = generate(p);
    this.send(datagram);
    return datagram;
  }

  /**
   * Sends a CON request and resolves with its response, piggybacked or separate (a separate CON response is ACKed);
   * the request is retransmitted every 2 s until answered, as a CoAP client does.
   */
  async exchange(p: Packet & { token: Buffer; messageId: number }, timeoutMs = 15_000): Promise<ParsedPacket> {
    const datagram = this.request({ ...p, confirmable: true });
    const end = Date.now() + timeoutMs;
    let resendAt = Date.now() + 2000;
    for (;;) {
      const answer = this.received.find((r) => r.code !== '0.00' && r.token.equals(p.token) && (r.confirmable || r.messageId === p.messageId));
      if (answer) {
        if (answer.confirmable) this.send(Buffer.from([0x60, 0, answer.messageId >> 8, answer.messageId & 0xff]));
        return answer;
      }
      if (Date.now() > end) throw new Error(`no CoAP answer to message ${p.messageId} within ${timeoutMs} ms`);
      if (Date.now() > resendAt && !this.received.some((r) => r.ack && r.messageId === p.messageId)) {
        this.send(datagram);
        resendAt = Date.now() + 2000;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Waits until `count` messages have arrived in all. */
  async waitFor(count: number, timeoutMs = 10_000): Promise<ParsedPacket[]> {
    const end = Date.now() + timeoutMs;
    while (this.raw.length < count) {
      if (Date.now() > end) throw new Error(`expected ${count} CoAP messages, got ${this.raw.length}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return this.received;
  }

  close(): void {
    this.#socket?.close();
  }
}

/**
 * Sends one CON request over plain UDP from a fresh socket and resolves with every datagram that came back up to its
 * answer: the piggybacked one, or an empty ACK (a handler slower than the piggyback window) then the separate
 * response, which is ACKed.
 */
export async function plainExchangeRaw(port: number, datagram: Buffer, timeoutMs = 15_000): Promise<Buffer[]> {
  const socket = dgram.createSocket('udp4');
  try {
    return await new Promise<Buffer[]>((resolve, reject) => {
      const got: Buffer[] = [];
      const timer = setTimeout(() => reject(new Error('no CoAP answer')), timeoutMs);
      socket.on('message', (m) => {
        got.push(m);
        const p = parse(m);
        if (p.code === '0.00') return; // the empty ACK: the answer follows
        if (p.confirmable) socket.send(Buffer.from([0x60, 0, p.messageId >> 8, p.messageId & 0xff]), port, '127.0.0.1');
        clearTimeout(timer);
        resolve(got);
      });
      socket.send(datagram, port, '127.0.0.1');
    });
  } finally {
    socket.close();
  }
}

/** The answer to one CON request over plain UDP (see plainExchangeRaw). */
export const plainExchange = async (port: number, datagram: Buffer, timeoutMs?: number): Promise<ParsedPacket> =>
  parse((await plainExchangeRaw(port, datagram, timeoutMs)).at(-1)!);
