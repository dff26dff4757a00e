/**
 * PostgreSQL stopped as in a crash (`pg_ctl stop -m immediate`) for 20 s under HTTPS and CoAP/DTLS load and under
 * API writes, in the one-process layout (`all`) and the split layout (`api,gateway` + `worker`), issue 41's first
 * "What must be shown": no service process exits, every HTTPS device keeps its one TLS connection (the server
 * closes none) and every CoAP/DTLS device its session (no full handshake, counted by the devices and by the
 * gateway's gridgate_dtls_sessions_started_total), every report answered 200/202 or 2.xx is stored exactly once
 * after PostgreSQL is back, and an API write during the outage is answered with a 5xx within its time limit, and
 * writes succeed again afterwards.
 *
 * Around the stop, BURST_WRITERS API writers write back to back (as a busy API does), so that the stop lands while writes
 * hold checked-out pool connections: before 2cbe77c/f1d9b10, such a connection's 'error' event had no listener and
 * ended the process (issue 41).
 */
import type { ChildProcess } from 'node:child_process';
import tls from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { createEnvironment, createMachineAccount } from '../../src/accounts/store.ts';
import { openDb, type Db } from '../../src/app/db.ts';
import { connectReporters, reportSteadily, type CoapReporter, type ReportRecord } from '../support/coap-reporters.ts';
import { startPrivatePostgres, type PrivatePostgres } from '../support/private-postgres.ts';
import type { RestClient } from '../support/provision.ts';
import { reportingDevices, type ReportingDevice } from '../support/report-world.ts';
import { freePort, startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { until } from '../support/until.ts';

const HTTPS_DEVICES = 10;
const COAP_DEVICES = 10;
const OUTAGE_MS = 20_000;
const AFTER_MS = 10_000;
/** an API write not answered in this long counts as hung */
const WRITE_TIMEOUT_MS = 10_000;
/** an HTTPS report not answered in this long counts as unanswered (GATEWAY_WAIT_MS is 1 s) */
const REPORT_TIMEOUT_MS = 15_000;
/** API writers that write back to back around the stop */
const BURST_WRITERS = 12;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const children: ChildProcess[] = [];
const postgres: PrivatePostgres[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const p of postgres) p.destroy();
});

/** A connectivity environment's REST client whose every request gives up after `timeoutMs` (status null then). */
async function apiClient(
  db: Db,
  base: string,
): Promise<RestClient & { jwtRequest(method: string, url: string, body: unknown, timeoutMs: number): Promise<number | 'timeout' | 'error'> }> {
  const env = await createEnvironment(db, 'connectivity', 'pg outage');
  const account = await createMachineAccount(db, env.hashId, ['ENVIRONMENT_ADMIN']);
  const login = await fetch(`${base}/authentication/machine-login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'api-version': '5' },
    body: JSON.stringify({ assertion: account.assertion }),
  });
  const { jwt } = (await login.json()) as { jwt: string };
  const headers = (body: unknown) => ({
    'api-version': '5',
    'environment-hash-id': env.hashId,
    authorization: `Bearer ${jwt}`,
    ...(body ? { 'content-type': 'application/json' } : {}),
  });
  return {
    environmentHashId: env.hashId,
    async request(method, url, body) {
      const res = await fetch(`${base}${url}`, {
        method,
        headers: headers(body),
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
    async jwtRequest(method, url, body, timeoutMs) {
      try {
        const res = await fetch(`${base}${url}`, { method, headers: headers(body), body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
        await res.arrayBuffer();
        return res.status;
      } catch (err) {
        return (err as Error).name === 'TimeoutError' ? 'timeout' : 'error';
      }
    },
  };
}

/** An HTTPS TLS-PSK device on one kept-alive connection: every report a request on it, one after the other. */
class KeptAliveDevice {
  readonly socket: tls.TLSSocket;
  /** when the connection closed (null: open) */
  closedAt: number | null = null;
  secureConnects = 0;
  #buffer = Buffer.alloc(0);
  #waiting: ((status: number | null) => void) | null = null;

  readonly device: ReportingDevice;

  constructor(port: number, device: ReportingDevice) {
    this.device = device;
    this.socket = tls.connect({
      host: '127.0.0.1',
      port,
      minVersion: 'TLSv1.2',
      maxVersion: 'TLSv1.2',
      ciphers: 'PSK-AES128-GCM-SHA256',
      checkServerIdentity: () => undefined,
      pskCallback: () => ({ psk: device.key, identity: device.identity }),
    });
    this.socket.on('secureConnect', () => {
      this.secureConnects++;
    });
    this.socket.on('error', () => undefined);
    this.socket.on('close', () => {
      this.closedAt = Date.now();
      this.#answer(null);
    });
    this.socket.on('data', (d: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, d]);
      const end = this.#buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.#buffer.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (this.#buffer.length < end + 4 + length) return;
      this.#buffer = this.#buffer.subarray(end + 4 + length);
      this.#answer(Number(head.split(' ')[1]));
    });
  }

  connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.secureConnects > 0) return resolve();
      this.socket.once('secureConnect', () => resolve());
      this.socket.once('close', () => reject(new Error(`${this.device.identity}: connection closed before the handshake`)));
    });
  }

  #answer(status: number | null): void {
    const w = this.#waiting;
    this.#waiting = null;
    w?.(status);
  }

  /** One report on the connection: the answer's status, or null (no answer in REPORT_TIMEOUT_MS, or the connection closed). */
  report(body: string): Promise<number | null> {
    if (this.closedAt !== null) return Promise.resolve(null);
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#answer(null), REPORT_TIMEOUT_MS);
      this.#waiting = (status) => {
        clearTimeout(timer);
        resolve(status);
      };
      this.socket.write(`POST /report HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
  }
}

interface HttpsRecord {
  n: number;
  sentAt: number;
  status: number | null;
}
interface WriteRecord {
  sentAt: number;
  ms: number;
  status: number | 'timeout' | 'error';
}

const STARTED = 'gridgate_dtls_sessions_started_total';
/** The sum of a counter's series that carry `labels`, from a /metrics text. */
function metric(text: string, name: string, labels: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? ([^ ]+)/.exec(line);
    if (m && m[1] === name && Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

async function outageUnderLoad(layout: 'one process' | 'split'): Promise<void> {
  const t0 = Date.now();
  const pg = await startPrivatePostgres();
  postgres.push(pg);
  const coaps = await freePort();
  const QUEUE_NAME = `pgout-${process.pid}-${Date.now()}`;
  const env = { DATABASE_URL: pg.url, QUEUE_NAME, GATEWAY_WAIT_MS: '1000', COAPS_PORT: String(coaps) };
  const procs: Array<{ name: string; p: ServiceProcess }> = [];
  if (layout === 'one process') procs.push({ name: 'all', p: await startServiceProcess(env, ['all'], { children }) });
  else {
    const edge = await startServiceProcess(env, ['api,gateway'], { children });
    procs.push({ name: 'api,gateway', p: edge });
    procs.push({
      name: 'worker',
      p: await startServiceProcess({ DATABASE_URL: pg.url, QUEUE_NAME, MONITORING_CORE_URL: edge.base }, ['worker'], { children }),
    });
  }
  const gateway = procs[0].p;
  // every exit while the test has not stopped the processes itself
  let stopping = false;
  const exits: Array<{ name: string; code: number | null; signal: string | null; at: number }> = [];
  for (const { name, p } of procs)
    p.child.once('exit', (code, signal) => {
      if (!stopping) exits.push({ name, code, signal, at: Date.now() - t0 });
    });
  const db = await openDb({ databaseUrl: pg.url, dataDir: '/tmp', migrate: false });
  const reporters: CoapReporter[] = [];
  const https: KeptAliveDevice[] = [];
  try {
    const api = await apiClient(db, gateway.base);
    const all = await reportingDevices(api, HTTPS_DEVICES + COAP_DEVICES);
    const written = await api.request('POST', '/quantity/', { name: 'Written', unit: '1', defaultOrderOfMagnitude: 0 });
    expect(written.status).toBe(200);
    const writtenHashId = (written.body as { hashId: string }).hashId;

    for (const d of all.slice(0, HTTPS_DEVICES)) https.push(new KeptAliveDevice(gateway.httpsPort, d));
    await Promise.all(https.map((h) => h.connected()));
    reporters.push(...(await connectReporters(coaps, all.slice(HTTPS_DEVICES), 5)));
    const startedBefore = metric(await (await fetch(`${gateway.base}/metrics`)).text(), STARTED, { origin: 'handshake' });

    let loadStopped = false;
    let stopCoap!: () => void;
    const coapLoad = reportSteadily(
      reporters,
      { port: coaps, periodMs: 300, ackTimeoutMs: 2000 },
      new Promise<void>((r) => {
        stopCoap = r;
      }),
    );
    const httpsRecords: HttpsRecord[] = [];
    let nextHttps = 1_000_000;
    const httpsLoad = Promise.all(
      https.map(async (h, d) => {
        const periodMs = 200 + (d * 300) / HTTPS_DEVICES;
        await sleep(Math.random() * periodMs);
        while (!loadStopped && h.closedAt === null) {
          const started = Date.now();
          const n = nextHttps++;
          const status = await h.report(JSON.stringify({ d: 100 + d, seq: n }));
          httpsRecords.push({ n, sentAt: started, status });
          await sleep(Math.max(0, started + periodMs - Date.now()));
        }
      }),
    );
    const writes: WriteRecord[] = [];
    const write = async (i: number) => {
      const sentAt = Date.now();
      const status = await api.jwtRequest('POST', `/quantity/${writtenHashId}`, { name: `Written ${i}` }, WRITE_TIMEOUT_MS);
      writes.push({ sentAt, ms: Date.now() - sentAt, status });
    };
    let writeCount = 0;
    const writer = (async () => {
      while (!loadStopped) {
        const started = Date.now();
        await write(writeCount++);
        await sleep(Math.max(0, started + 200 - Date.now()));
      }
    })();

    await sleep(3000);
    // writers back to back from 1 s before the stop to 1 s after: the stop finds writes on checked-out connections
    let burst = true;
    const bursts = Promise.all(
      Array.from({ length: BURST_WRITERS }, async () => {
        while (burst) await write(writeCount++);
      }),
    );
    await sleep(1000);
    const stoppedAt = Date.now();
    // not pg.kill(): its spawnSync would hold this process, and with it the writers, until PostgreSQL is gone
    await pg.killAsync();
    await sleep(1000);
    burst = false;
    await bursts;
    await sleep(OUTAGE_MS - (Date.now() - stoppedAt));
    const restartedAt = Date.now();
    pg.start();
    const upAt = Date.now();
    await sleep(AFTER_MS);
    loadStopped = true;
    stopCoap();
    // a device that lost its session handshakes again; when that fails (the gateway gone), its load ends with an
    // error, which is told after the exits (the cause)
    let coapError: Error | null = null;
    const coapRecords: ReportRecord[] = await coapLoad.catch((err: Error) => {
      coapError = err;
      return [];
    });
    await Promise.all([httpsLoad, writer]);
    const startedAfter = exits.length > 0 ? startedBefore : metric(await (await fetch(`${gateway.base}/metrics`)).text(), STARTED, { origin: 'handshake' });

    const count = <T>(xs: T[], key: (x: T) => unknown) => {
      const m = new Map<unknown, number>();
      for (const x of xs) m.set(key(x), (m.get(key(x)) ?? 0) + 1);
      return JSON.stringify([...m]);
    };
    const during = (r: { sentAt: number }) => r.sentAt >= stoppedAt && r.sentAt < restartedAt;
    const duringWrites = writes.filter((w) => w.sentAt >= stoppedAt + 500 && w.sentAt < restartedAt);
    const afterWrites = writes.filter((w) => w.sentAt >= upAt + 5000);
    console.log(
      `${layout}: PostgreSQL down ${restartedAt - stoppedAt} ms (up again ${upAt - restartedAt} ms after pg_ctl start); exits ${JSON.stringify(exits)}` +
        `\n  HTTPS: ${httpsRecords.length} reports (${httpsRecords.filter(during).length} during the outage), answers ${count(httpsRecords, (r) => r.status)}, during ${count(httpsRecords.filter(during), (r) => r.status)};` +
        ` connections closed ${https.filter((h) => h.closedAt !== null).length} of ${https.length}, TLS handshakes ${https.reduce((a, h) => a + h.secureConnects, 0)}` +
        `\n  CoAP: ${coapRecords.length} reports (${coapRecords.filter(during).length} during), answers ${count(coapRecords, (r) => r.code)}, retransmissions ${coapRecords.reduce((a, r) => a + r.retransmissions, 0)},` +
        ` 5.03 ${coapRecords.reduce((a, r) => a + r.refusals, 0)}, unanswered ${reporters.reduce((a, r) => a + r.unanswered, 0)}, device handshakes after the first ${reporters.reduce((a, r) => a + r.handshakes - 1, 0)},` +
        ` gateway full handshakes ${startedBefore} before the load, ${startedAfter - startedBefore} during it` +
        `\n  API writes: ${writes.length}, during the outage ${count(duringWrites, (w) => w.status)} (longest ${Math.max(0, ...duringWrites.map((w) => w.ms))} ms),` +
        ` from 5 s after it ${count(afterWrites, (w) => w.status)}; all ${count(writes, (w) => w.status)}`,
    );

    // no process exited
    expect(exits, 'service processes that exited').toEqual([]);
    for (const { p } of procs) expect(p.child.exitCode).toBeNull();
    if (coapError) throw coapError;
    // every HTTPS device kept its one connection, every request on it was answered
    expect(
      https.filter((h) => h.closedAt !== null).map((h) => h.device.identity),
      'HTTPS connections closed',
    ).toEqual([]);
    expect(https.map((h) => h.secureConnects)).toEqual(https.map(() => 1));
    expect(httpsRecords.filter((r) => r.status === null).length, 'HTTPS reports not answered').toBe(0);
    expect(httpsRecords.filter(during).length).toBeGreaterThan(0);
    // every CoAP/DTLS device kept its session
    expect(
      reporters.reduce((a, r) => a + r.handshakes - 1, 0),
      'full handshakes of the devices after the first',
    ).toBe(0);
    expect(
      reporters.reduce((a, r) => a + r.unanswered, 0),
      'CoAP reports whose retransmissions ran out',
    ).toBe(0);
    expect(startedAfter - startedBefore, 'sessions the gateway started by a full handshake during the load').toBe(0);
    expect(
      coapRecords.filter((r) => r.code === null || !r.code.startsWith('2.')),
      'CoAP reports not answered 2.xx',
    ).toEqual([]);
    expect(coapRecords.filter(during).length).toBeGreaterThan(0);
    // API writes: a prompt 503 unavailable_error while PostgreSQL is away (not a 500: the service is not broken), 2xx again once it is back
    expect(duringWrites.length).toBeGreaterThan(0);
    expect(
      duringWrites.filter((w) => w.status !== 503),
      'writes during the outage not answered 503',
    ).toEqual([]);
    expect(afterWrites.length).toBeGreaterThan(0);
    expect(
      afterWrites.filter((w) => typeof w.status !== 'number' || w.status >= 300),
      'writes after the outage that failed',
    ).toEqual([]);

    // every accepted report stored exactly once (its number is the measurement's significand)
    const accepted = [...httpsRecords.filter((r) => r.status === 200 || r.status === 202).map((r) => r.n), ...coapRecords.map((r) => r.n)];
    const stored = async () => {
      const { rows } = await db.query<{ n: string; c: number }>(
        'SELECT m.significand AS n, count(*)::int AS c FROM measurement m JOIN device d ON d.id = m.device_id WHERE d.hash_id = ANY($1) GROUP BY m.significand',
        [all.map((d) => d.hashId)],
      );
      return new Map(rows.map((r) => [Number(r.n), r.c]));
    };
    const counts = await until(stored, (c) => accepted.every((n) => c.has(n)), 'every accepted report stored', 60_000, 250);
    const wrong = accepted.filter((n) => counts.get(n) !== 1).map((n) => ({ n, stored: counts.get(n) ?? 0 }));
    console.log(
      `${layout}: ${accepted.length} reports accepted, ${[...counts.values()].reduce((a, c) => a + c, 0)} stored (${counts.size} distinct), ${wrong.length} not stored exactly once; ${Date.now() - t0} ms`,
    );
    expect(wrong, 'accepted reports not stored exactly once').toEqual([]);
  } finally {
    stopping = true;
    for (const r of reporters) r.close();
    for (const h of https) h.socket.destroy();
    await db.close().catch(() => undefined);
    for (const { p } of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
    await Promise.race([Promise.all(procs.map(({ p }) => p.exited)), sleep(15_000)]);
    for (const { p } of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    pg.destroy();
  }
}

describe('PostgreSQL stopped for 20 s under HTTPS and CoAP/DTLS load and API writes', () => {
  it(
    'one process (all roles): no exit, every connection and session kept, every accepted report stored once, writes fail fast and recover',
    () => outageUnderLoad('one process'),
    150_000,
  );
  it('split (api,gateway + worker): the same', () => outageUnderLoad('split'), 150_000);
});
