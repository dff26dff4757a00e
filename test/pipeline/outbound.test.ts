import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { hostAllowed, MAX_REQUESTS_PER_RUN, OutboundClient } from '../../src/pipeline/outbound.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { connectivityClient, pskDevice, type RestClient } from '../support/provision.ts';
import { pskHttpRequest } from '../support/psk-client.ts';

// A third party's HTTPS endpoint on 127.0.0.1, with self-signed certificates made by openssl:
// `trusted` is handed to the service as OUTBOUND_CA_FILE, `untrusted` is not.
const dir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-outbound-'));
function selfSigned(name: string): { key: string; cert: string; certFile: string } {
  const keyFile = path.join(dir, `${name}.key`);
  const certFile = path.join(dir, `${name}.pem`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '1',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile };
}

interface Received {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}
const received: Received[] = [];

function startThirdParty(credentials: { key: string; cert: string }): Promise<https.Server> {
  const server = https.createServer(credentials, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      if (req.url === '/slow') return; // never answers: the caller's timeout must end it
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.end('x'.repeat(5000));
        return;
      }
      if (req.url === '/moved') {
        res.writeHead(302, { location: 'https://elsewhere.example/' });
        res.end();
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json', 'x-third': 'party' });
      res.end(JSON.stringify({ got: Buffer.concat(chunks).toString() }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const trusted = selfSigned('localhost');
const untrusted = selfSigned('stranger');
let server: https.Server;
let strangerServer: https.Server;
let base: string;
let strangerBase: string;

beforeAll(async () => {
  server = await startThirdParty(trusted);
  strangerServer = await startThirdParty(untrusted);
  base = `https://localhost:${(server.address() as net.AddressInfo).port}`;
  strangerBase = `https://localhost:${(strangerServer.address() as net.AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  strangerServer.closeAllConnections();
  await Promise.all([new Promise((r) => server.close(r)), new Promise((r) => strangerServer.close(r))]);
});

const client = (o: Partial<ConstructorParameters<typeof OutboundClient>[0]> = {}) =>
  new OutboundClient({ allowedHosts: ['localhost'], timeoutMs: 500, maxResponseBytes: 1000, extraCa: trusted.cert, ...o });
const req = (
  url: string,
  more: Partial<{
    method: string;
    headers: Record<string, string>;
    body: { type: 'json'; data: unknown } | { type: 'hex' | 'string'; data: string } | null;
  }> = {},
) => ({ url, method: 'POST', headers: {}, body: null, ...more }) as Parameters<OutboundClient['send']>[0];

describe('outbound requests (src/pipeline/outbound.ts, undici)', () => {
  it('matches hosts exactly or by *.domain', () => {
    expect(hostAllowed('api.example.com', ['api.example.com'])).toBe(true);
    expect(hostAllowed('API.Example.com', ['api.example.com'])).toBe(true);
    expect(hostAllowed('evil-api.example.com', ['api.example.com'])).toBe(false);
    expect(hostAllowed('a.b.example.com', ['*.example.com'])).toBe(true);
    expect(hostAllowed('example.com', ['*.example.com'])).toBe(false);
    expect(hostAllowed('badexample.com', ['*.example.com'])).toBe(false);
    expect(hostAllowed('anything', [])).toBe(false);
  });

  it('makes the request with method, headers and typed body, and reports status, headers, body and duration', async () => {
    const c = client();
    try {
      const before = received.length;
      const out = await c.send(req(`${base}/hook?x=1`, { headers: { 'x-api-key': 'k1' }, body: { type: 'json', data: { temp: 21.5 } } }));
      expect(out.failed).toBe(false);
      expect(out.message).toMatch(new RegExp(`^POST ${base}/hook\\?x=1 → 201 in \\d+ ms$`));
      expect(out.triggerData.response).toMatchObject({
        statusCode: 201,
        truncated: false,
        headers: { 'x-third': 'party' },
        body: { type: 'json', data: { got: '{"temp":21.5}' } },
      });
      expect(out.triggerData.durationMs).toBeGreaterThanOrEqual(0);
      const got = received[before];
      expect(got).toMatchObject({ method: 'POST', url: '/hook?x=1', headers: { 'x-api-key': 'k1', 'content-type': 'application/json' } });
      expect(got.body.toString()).toBe('{"temp":21.5}');

      await c.send(req(`${base}/bytes`, { method: 'PUT', body: { type: 'hex', data: '00ff10' } }));
      expect(received[before + 1]).toMatchObject({ method: 'PUT', headers: { 'content-type': 'application/octet-stream' } });
      expect(received[before + 1].body.equals(Buffer.from('00ff10', 'hex'))).toBe(true);
      // redirects are not followed: the handler sees the 302
      // the idempotency key goes out unless the handler set its own
      await c.send(req(`${base}/keyed`), 'k-123');
      await c.send(req(`${base}/keyed`, { headers: { 'Idempotency-Key': 'own' } }), 'k-123');
      expect(received.slice(before + 2).map((r) => r.headers['idempotency-key'])).toEqual(['k-123', 'own']);
      const moved = await c.send(req(`${base}/moved`, { method: 'GET' }));
      expect(moved.triggerData.response).toMatchObject({ statusCode: 302, headers: { location: 'https://elsewhere.example/' } });
    } finally {
      await c.close();
    }
  });

  it('refuses hosts off the allow-list, other schemes and bad methods without connecting', async () => {
    const c = client();
    const none = client({ allowedHosts: [] });
    try {
      const before = received.length;
      const port = (server.address() as net.AddressInfo).port;
      expect(await c.send(req(`https://127.0.0.1:${port}/x`))).toMatchObject({
        failed: true,
        triggerData: { error: 'host 127.0.0.1 is not in OUTBOUND_ALLOWED_HOSTS', response: null },
      });
      expect((await none.send(req(`${base}/x`))).triggerData.error).toBe('this deployment allows no outbound hosts (OUTBOUND_ALLOWED_HOSTS is empty)');
      expect((await c.send(req(`http://localhost:${port}/x`))).triggerData.error).toBe('only https URLs are allowed, not http');
      expect((await c.send(req('not a url'))).triggerData.error).toBe('url is not an absolute URL');
      expect((await c.send(req(`https://u:p@localhost:${port}/x`))).triggerData.error).toContain('credentials');
      expect((await c.send(req(`${base}/x`, { method: 'GET /x HTTP/1.1\r\n' }))).triggerData.error).toContain('not an HTTP method');
      expect(received.length).toBe(before);
    } finally {
      await Promise.all([c.close(), none.close()]);
    }
  });

  it('fails on an untrusted certificate, times out, and cuts a large response at the cap', async () => {
    const c = client();
    try {
      const stranger = await c.send(req(`${strangerBase}/x`));
      expect(stranger.failed).toBe(true);
      expect(stranger.triggerData.error).toMatch(/certificate/i);

      const slow = await c.send(req(`${base}/slow`));
      expect(slow).toMatchObject({ failed: true, triggerData: { error: 'no complete answer within OUTBOUND_TIMEOUT_MS (500 ms)' } });
      expect(slow.triggerData.durationMs).toBeGreaterThanOrEqual(450);

      const big = await c.send(req(`${base}/big`, { method: 'GET' }));
      expect(big.failed).toBe(false);
      expect(big.triggerData.response).toMatchObject({ statusCode: 200, truncated: true, body: { type: 'string', data: 'x'.repeat(1000) } });
      expect(big.message).toContain('cut off after 1000 bytes');
    } finally {
      await c.close();
    }
  });
});

// The handler asks for requests; the worker makes them after the run and puts the results on the activity.
const HANDLER = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  const body = args.event.webRequest.body;
  const urls = body !== undefined && body.type === 'json' ? (body.data as { urls: string[] }).urls : [];
  exec.addLog('fetch inside the sandbox: ' + typeof (globalThis as { fetch?: unknown }).fetch);
  urls.forEach((url, i) => exec.sendRequest({ url, method: 'POST', headers: { 'x-n': String(i) }, body: { device: args.device.supplierDeviceIdentifier } }));
  return { statusCode: 200, body: { asked: urls.length } };
}`;

describe('exec.sendRequest end to end (device over HTTPS TLS-PSK → handler → undici after the run)', () => {
  let ctx: AppContext;
  let service: RunningService;
  let api: RestClient;
  let device: { hashId: string; identity: string; key: Buffer };

  beforeAll(async () => {
    ctx = await testContext({
      OUTBOUND_ALLOWED_HOSTS: 'localhost',
      OUTBOUND_CA_FILE: trusted.certFile,
      OUTBOUND_TIMEOUT_MS: '500',
      OUTBOUND_MAX_RESPONSE_BYTES: '1000',
    });
    service = await startService(ctx, ['all']);
    api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
    device = await pskDevice(api, HANDLER);
  });
  afterAll(async () => {
    await service?.stop();
    await closeContext(ctx);
  });

  async function lastRun() {
    const rows = (await api.request<{ rows: { activity: { hashId: string } }[] }>('GET', `/supplier-activity/?deviceHashId=${device.hashId}&rowsPerPage=1`))
      .body.rows;
    return (
      await api.request<{
        activity: {
          log: { message: string }[];
          activities: {
            hashId: string;
            triggerType: string;
            failed: boolean;
            log: { type: string; message: string }[];
            triggerData: {
              error: string | null;
              durationMs: number | null;
              request?: { incoming: boolean; response: { statusCode: number; body: unknown; truncated: boolean } | null };
            };
          }[];
        };
      }>('GET', `/supplier-activity/${rows[0].activity.hashId}`)
    ).body.activity;
  }

  it("records status, duration and body of an allowed request, and a refused host, on the run's activity", async () => {
    const port = (server.address() as net.AddressInfo).port;
    const before = received.length;
    const res = await pskHttpRequest({
      port: service.https!.port(),
      identity: device.identity,
      key: device.key,
      path: '/report',
      body: JSON.stringify({ urls: [`${base}/hook`, `https://127.0.0.1:${port}/hook`, `${base}/big`] }),
    });
    expect(res?.status).toBe(200);
    expect(JSON.parse(res!.body)).toEqual({ asked: 3 });

    const run = await lastRun();
    expect(run.log.map((l) => l.message)).toContain('fetch inside the sandbox: undefined');
    const [ok, refused, big] = run.activities;
    // the SDK's sendRequest activity: the request as an outgoing WebRequest, with the outcome's duration and error beside it
    expect(ok).toMatchObject({
      triggerType: 'sendRequest',
      failed: false,
      triggerData: {
        error: null,
        request: {
          hashId: ok.hashId,
          incoming: false,
          request: { url: { protocol: 'https', host: new URL(base).host, path: '/hook', query: {} }, method: 'post', certificate: null },
          response: { statusCode: 201, body: { type: 'json', data: { got: JSON.stringify({ device: device.identity }) } } },
        },
      },
    });
    expect(ok.triggerData.durationMs).toBeGreaterThanOrEqual(0);
    expect(ok.log[0].message).toMatch(/→ 201 in \d+ ms/);
    expect(refused).toMatchObject({
      triggerType: 'sendRequest',
      failed: true,
      triggerData: { error: 'host 127.0.0.1 is not in OUTBOUND_ALLOWED_HOSTS', request: { response: null } },
    });
    expect(refused.log[0]).toEqual({ type: 'error', message: `POST https://127.0.0.1:${port}/hook refused: host 127.0.0.1 is not in OUTBOUND_ALLOWED_HOSTS` });
    expect(big.triggerData.request?.response).toMatchObject({ statusCode: 200, truncated: true });
    // the allowed two reached the third party, the refused one did not
    expect(received.slice(before).map((r) => [r.url, r.headers['x-n']])).toEqual([
      ['/hook', '0'],
      ['/big', '2'],
    ]);
    // each carries its sub-activity's hashId as Idempotency-Key: a retried job sends the same key again
    expect(received.slice(before).map((r) => r.headers['idempotency-key'])).toEqual([ok.hashId, big.hashId]);
  });

  it(`makes at most ${MAX_REQUESTS_PER_RUN} requests per run and shows the rest as refused; a slow endpoint fails only its call`, async () => {
    const urls = [`${base}/slow`, ...Array.from({ length: MAX_REQUESTS_PER_RUN }, (_, i) => `${base}/n${i}`)];
    const res = await pskHttpRequest({
      port: service.https!.port(),
      identity: device.identity,
      key: device.key,
      path: '/report',
      body: JSON.stringify({ urls }),
    });
    expect(res?.status).toBe(200);
    const run = await lastRun();
    expect(run.activities).toHaveLength(MAX_REQUESTS_PER_RUN + 1);
    expect(run.activities[0].triggerData.error).toBe('no complete answer within OUTBOUND_TIMEOUT_MS (500 ms)');
    expect(run.activities.slice(1, MAX_REQUESTS_PER_RUN).every((a) => !a.failed)).toBe(true);
    expect(run.activities[MAX_REQUESTS_PER_RUN]).toMatchObject({
      failed: true,
      log: [{ type: 'error', message: `not sent: at most ${MAX_REQUESTS_PER_RUN} sendRequest calls per run` }],
    });
  });
});
