// The HTTPS device port serves two kinds of TLS: TLS-PSK (our server) and certificate TLS (node:tls),
// chosen by the ClientHello. Real curl and openssl against the running service.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { peekClientHello } from '../../src/gateway/https-tls.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { testContext } from '../helpers.ts';
import { httpRequestText, opensslPsk, parseHttpResponse } from '../support/openssl.ts';
import { connectivityClient, pskDevice } from '../support/provision.ts';
import { curl, run, tempDir } from './support.ts';

let ctx: AppContext;
let service: RunningService;
let certsDir: string;
let port: number;
const ECHO = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  return { statusCode: 200, body: { psk: args.event.webRequest.pskIdentity ?? null } };
}`;

beforeAll(async () => {
  certsDir = tempDir();
  ctx = await testContext({ CERTS_DIR: certsDir });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
});

afterAll(async () => {
  await service?.stop();
  if (ctx) await closeContext(ctx);
});

describe('HTTPS device port: TLS-PSK and certificate TLS on one port', () => {
  it('a TLS connection without a client certificate reaches the HTTP handler (401 for a device path) with the server certificate of certs/', async () => {
    const res = await curl(`https://localhost:${port}/report`, { cacert: path.join(certsDir, 'ca.pem'), data: '{"a":1}' });
    expect(res.code).toBe(0);
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toMatchObject({ key: 'authentication_error' });
    // the server certificate is verified by curl against the CA of certs/: a different CA fails
    const other = tempDir();
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      '/CN=other',
      '-keyout',
      path.join(other, 'k'),
      '-out',
      path.join(other, 'ca.pem'),
    ]);
    const wrong = await curl(`https://localhost:${port}/report`, { cacert: path.join(other, 'ca.pem') });
    expect(wrong.code).toBe(60);
  });

  it('TLS 1.3 and keep-alive work on the certificate path', async () => {
    const r = await run(
      'openssl',
      ['s_client', '-connect', `127.0.0.1:${port}`, '-tls1_3', '-quiet', '-CAfile', path.join(certsDir, 'ca.pem'), '-verify_return_error'],
      httpRequestText('GET', '/x', null, 'application/json', false) + httpRequestText('GET', '/y', null),
    );
    const answers = r.stdout.split('HTTP/1.1 ').length - 1;
    expect(answers).toBe(2);
    expect(parseHttpResponse(r.stdout).status).toBe(401);
  });

  it('a PSK device still gets its handler answer on the same port', async () => {
    const api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
    const device = await pskDevice(api, ECHO);
    const r = await opensslPsk({
      port,
      identity: device.identity,
      keyHex: device.key.toString('hex'),
      cipher: 'PSK-AES128-CCM8',
      input: httpRequestText('POST', '/r', '{"v":1}'),
    });
    const answer = parseHttpResponse(r.stdout);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ psk: device.identity });
  });
});

describe('peekClientHello', () => {
  const hello = (suites: number[], sid = 0) => {
    const body = Buffer.concat([
      Buffer.from([3, 3]),
      Buffer.alloc(32, 7),
      Buffer.from([sid]),
      Buffer.alloc(sid, 1),
      Buffer.from([0, suites.length * 2]),
      Buffer.from(suites.flatMap((s) => [s >> 8, s & 0xff])),
      Buffer.from([1, 0]),
    ]);
    const hs = Buffer.concat([Buffer.from([1, 0, body.length >> 8, body.length & 0xff]), body]);
    return Buffer.concat([Buffer.from([22, 3, 1, hs.length >> 8, hs.length & 0xff]), hs]);
  };
  it('finds our PSK suites, waits for the whole record, and sends everything else to node:tls', () => {
    expect(peekClientHello(hello([0xc02b, 0xc0a8], 32))).toEqual({ complete: true, offersPsk: true });
    expect(peekClientHello(hello([0x00a8]))).toEqual({ complete: true, offersPsk: true });
    expect(peekClientHello(hello([0xc02b, 0x1301]))).toEqual({ complete: true, offersPsk: false });
    const full = hello([0xc0a8]);
    expect(peekClientHello(full.subarray(0, 3))).toEqual({ complete: false });
    expect(peekClientHello(full.subarray(0, full.length - 1))).toEqual({ complete: false });
    expect(peekClientHello(Buffer.from('GET / HTTP/1.1\r\n'))).toEqual({ complete: true, offersPsk: false });
    const truncated = Buffer.from(full);
    truncated.writeUInt16BE(0xffff, 3);
    expect(peekClientHello(truncated)).toEqual({ complete: true, offersPsk: false });
  });
});
