// Defences of the HTTPS device port against clients without credentials, through the running service.
import net from 'node:net';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeContext } from '../../src/context.ts';
import type { AppContext } from '../../src/app/context.ts';
import { startService, type RunningService } from '../../src/service.ts';
import { encodeClientHello } from '../../src/tls/messages.ts';
import { encodePlaintextRecord } from '../../src/tls/record.ts';
import { MAX_PSK_IDENTITY_BYTES } from '../../src/tls/psk.ts';
import { testContext } from '../helpers.ts';
import { TestClient } from '../tls/helpers.ts';
import { opensslPsk } from '../support/openssl.ts';
import { pskHttpRequest } from '../support/psk-client.ts';
import { connectivityClient, pskDevice } from '../support/provision.ts';
import { until } from '../support/until.ts';

const ECHO = `function handle(args: Arguments, exec: Exec): IncomingRequestResponse | void {
  if (args.event.type !== 'incomingRequest') return;
  return { statusCode: 200, body: { ok: true } };
}`;

let ctx: AppContext;
let service: RunningService;
let port: number;
let device: { identity: string; key: Buffer };
let api: Awaited<ReturnType<typeof connectivityClient>>;
const sockets: net.Socket[] = [];

beforeAll(async () => {
  ctx = await testContext({ HTTPS_MAX_CONNECTIONS_PER_ADDRESS: '2', HTTPS_HANDSHAKE_BURST_PER_ADDRESS: '4', HTTPS_HANDSHAKE_RATE_PER_ADDRESS: '1' });
  service = await startService(ctx, ['all']);
  port = service.https!.port();
  api = await connectivityClient(ctx.db, `http://127.0.0.1:${service.apiPort()}`);
  device = await pskDevice(api, ECHO);
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await service?.stop();
  if (ctx) await closeContext(ctx);
});

/** A ClientHello record offering our PSK suites, with `announced` as its handshake length (default: the true one). */
function pskClientHello(announced?: number): Buffer {
  const body = encodeClientHello({
    clientVersion: 0x0303,
    random: randomBytes(32),
    sessionId: Buffer.alloc(0),
    cipherSuites: [0xc0a8, 0x00a8, 0x00ff],
    compressionMethods: Buffer.from([0]),
    extensions: [],
  });
  const head = Buffer.alloc(4);
  head[0] = 1;
  head.writeUIntBE(announced ?? body.length, 1, 3);
  return encodePlaintextRecord(22, 0x0301, Buffer.concat([head, body]));
}

/** Connects from `localAddress` and sends `hello`: 'served' once the server answers, 'refused' if it closes first. */
async function attempt(localAddress: string, hello = pskClientHello()): Promise<{ outcome: 'served' | 'refused'; socket: net.Socket; first: Buffer | null }> {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress });
  sockets.push(socket);
  socket.on('error', () => undefined);
  await once(socket, 'connect');
  socket.write(hello);
  const first = await new Promise<Buffer | null>((resolve) => {
    socket.once('data', (d: Buffer) => resolve(d));
    socket.once('close', () => resolve(null));
  });
  return { outcome: first ? 'served' : 'refused', socket, first };
}

function openConnections(): Promise<number> {
  return new Promise((resolve, reject) => service.https!.tcp.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

describe('per-address limits on the HTTPS device port', () => {
  it('an address at its connection cap is refused while another address is still served', async () => {
    const held = [await attempt('127.0.0.2'), await attempt('127.0.0.2')];
    expect(held.map((h) => h.outcome)).toEqual(['served', 'served']);
    expect((await attempt('127.0.0.2')).outcome).toBe('refused');

    const answer = await pskHttpRequest({ port, identity: device.identity, key: device.key, path: '/r', body: '{}', localAddress: '127.0.0.3' });
    expect(answer?.status).toBe(200);

    // a closed connection gives its place back
    held[0].socket.destroy();
    await until(
      () => attempt('127.0.0.2').then((a) => a.outcome),
      (o) => o === 'served',
      'a connection from 127.0.0.2 admitted again',
    );
    for (const h of held) h.socket.destroy();
  });

  it('an address opening connections faster than its handshake rate is refused while another address is still served', async () => {
    const outcomes: string[] = [];
    // one connection at a time, so only the rate (burst 4, then 1 a second) can refuse one
    for (let i = 0; i < 40 && !outcomes.includes('refused'); i++) {
      const before = await openConnections();
      const a = await attempt('127.0.0.4');
      outcomes.push(a.outcome);
      a.socket.destroy();
      await until(openConnections, (n) => n < before + 1, 'the server to close the connection');
    }
    expect(outcomes.slice(0, 4)).toEqual(['served', 'served', 'served', 'served']);
    expect(outcomes).toContain('refused');

    const answer = await pskHttpRequest({ port, identity: device.identity, key: device.key, path: '/r', body: '{}', localAddress: '127.0.0.5' });
    expect(answer?.status).toBe(200);
  });
});

describe('handshake size on the HTTPS device port', () => {
  it('a PSK ClientHello announcing 65,532 bytes is answered with a fatal alert before the rest is sent', async () => {
    const a = await attempt('127.0.0.6', pskClientHello(65_532));
    expect(a.outcome).toBe('served');
    // handshake_failure, fatal
    expect([...a.first!]).toEqual([21, 3, 3, 0, 2, 2, 40]);
    a.socket.destroy();
  });
});

describe('PSK identities on the HTTPS device port', () => {
  it('an unknown identity gets the same alert as a known one with a wrong key', async () => {
    const alertOf = (stderr: string) => stderr.match(/alert ([a-z ]+?)(?::|\n|$)/i)?.[1];
    const input = 'GET / HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n';
    const wrong = await opensslPsk({ port, identity: device.identity, keyHex: randomBytes(16).toString('hex'), input });
    const unknown = await opensslPsk({ port, identity: `nobody-${randomBytes(4).toString('hex')}`, keyHex: randomBytes(16).toString('hex'), input });
    expect(alertOf(wrong.stderr)).toMatch(/bad record mac/i);
    expect(alertOf(unknown.stderr)).toBe(alertOf(wrong.stderr));
  });

  it(`an identity longer than ${MAX_PSK_IDENTITY_BYTES} bytes fails as a wrong key does and leaves no cache key behind`, async () => {
    const identity = `long-${'x'.repeat(MAX_PSK_IDENTITY_BYTES)}`;
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.8' });
    sockets.push(socket);
    await once(socket, 'connect');
    const c = new TestClient(socket);
    await expect(c.handshake({ identity, psk: randomBytes(16) })).rejects.toThrow(/^alert 20$/);
    await c.waitClose();
    expect(await ctx.redis.exists(`${ctx.config.queueName}:psk:${identity}`)).toBe(0);
  });

  it('the longest identity the API accepts (255 four-byte characters) still completes a handshake', async () => {
    const identity = '\u{1F600}'.repeat(255);
    expect(Buffer.byteLength(identity)).toBe(MAX_PSK_IDENTITY_BYTES);
    const key = randomBytes(16);
    const type = await api.request('POST', '/device-type/', {
      name: 'long identity',
      eventHandler: ECHO,
      fieldConfigurations: [],
      pinGroupFieldConfigurations: [],
      channels: [],
      commandTypeHashIds: [],
    });
    const created = await api.request('POST', '/device/psk', {
      supplierDeviceIdentifier: 'long-identity',
      deviceTypeHashId: type.body.hashId,
      psk: key.toString('hex'),
      pskIdentity: identity,
    });
    expect(created.status).toBe(200);
    const socket = net.connect({ port, host: '127.0.0.1', localAddress: '127.0.0.9' });
    sockets.push(socket);
    await once(socket, 'connect');
    await new TestClient(socket).handshake({ identity, psk: key });
    socket.destroy();
  });
});
