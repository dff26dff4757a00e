import http from 'node:http';
import type net from 'node:net';
import type { AppContext } from '../app/context.ts';
import { counterRecorder, countDeviceEvent } from '../connectivity/counters/recorder.ts';
import { AddressLimits } from '../dtls/limits.ts';
import { disposeCertificateIdentity } from './device-identity.ts';
import { certificateRefusal, serveCertificateTls } from './https-tls.ts';
import type { DeviceQueue } from '../pipeline/queue.ts';
import { createPskTlsServer, type PskTlsConnection } from '../tls/index.ts';
import { firmwareRequestHashId, serveFirmwareOverHttps } from './firmware.ts';
import { metrics } from '../app/metrics.ts';
import { readBounded, refuseRestOfBody } from './request-body.ts';
import { encodeAnswerBody, parseQuery, typedBody, webRequest } from '../sandbox/web-request.ts';
import { isWebhookPath, WebhookHandler } from './webhook.ts';
import { RefusalLog } from './refusal-log.ts';
import { countHandshakeFailed, countRefusedContact, pskDevice, pskKeyLookup, REFUSED_MESSAGE, type AdmittedDevice } from './admission.ts';

export interface HttpsDeviceListener {
  tcp: net.Server;
  port(): number;
  /** Stops accepting, lets requests in flight get their answers (bounded by `graceMs`), then closes every connection. */
  close(graceMs: number): Promise<void>;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const payload = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': payload.length });
  res.end(payload);
}

/**
 * The device-facing HTTPS listener (TLS 1.2 PSK, and mutual TLS with device certificates on the same
 * port: src/gateway/https-tls.ts): every request becomes a WebRequest, is
 * queued durably, and is answered with what the device type's handler returned.
 */
export async function startHttpsDeviceListener(ctx: AppContext, queue: DeviceQueue, port: number): Promise<HttpsDeviceListener> {
  const sessions = new WeakMap<object, AdmittedDevice>();
  let inFlight = 0;
  let closing = false;
  const webhooks = new WebhookHandler(ctx, queue);
  const tcp = createPskTlsServer({ lookupPsk: pskKeyLookup(ctx) });
  const server = http.createServer({ keepAliveTimeout: 60_000, requestTimeout: 30_000 }, (req, res) => {
    const conn = req.socket as unknown as PskTlsConnection;
    const session = sessions.get(conn);
    if (!session && isWebhookPath(req.url)) {
      // a webhook sender has no device session: the secret in its URL authenticates it (src/gateway/webhook.ts)
      if (closing) res.setHeader('connection', 'close');
      inFlight++;
      webhooks.serve(req, res).finally(() => {
        inFlight--;
      });
      return;
    }
    if (!session) {
      // no device session: a certificate-TLS connection without a client certificate (webhooks), or whose certificate named no device
      send(res, 401, { key: 'authentication_error', message: certificateRefusal(conn) ?? 'no authenticated device session' });
      return;
    }
    if (session.refused) {
      countRefusedContact(ctx, 'https', session.deviceHashId);
      res.setHeader('connection', 'close');
      send(res, 403, { key: 'right_error', message: REFUSED_MESSAGE });
      return;
    }
    if (closing) res.setHeader('connection', 'close');
    inFlight++;
    handleRequest(ctx, queue, session, conn, req, res)
      .catch((err: Error) => {
        ctx.log.error({ err: err.message }, 'device request failed');
        if (!res.headersSent) send(res, 503, { key: 'unavailable_error', message: 'the request could not be queued; try again' });
      })
      .finally(() => {
        inFlight--;
      });
  });
  // no automatic `100 Continue`: the webhook and device paths send it only for a body they will read (a 401 or 413 comes instead)
  server.on('checkContinue', (req, res) => server.emit('request', req, res));
  tcp.on('secureConnection', (conn: PskTlsConnection) => {
    pskDevice(ctx, conn.pskIdentity).then(
      (device) => {
        if (!device) {
          conn.destroy();
          return;
        }
        sessions.set(conn, device);
        server.emit('connection', conn);
      },
      () => conn.destroy(),
    );
  });
  const refusals = new RefusalLog(ctx.log);
  tcp.on('tlsClientError', (err: Error, info: { remoteAddress: string; pskIdentity?: string }) => {
    countHandshakeFailed(ctx, 'https', info.pskIdentity);
    refusals.refused('https', info, err.message);
  });
  // the same port serves certificate TLS: ClientHellos without our PSK suites go to node:tls (src/gateway/https-tls.ts)
  serveCertificateTls(ctx, tcp, {
    onConnection(conn, device) {
      if (device)
        sessions.set(conn, { deviceHashId: device.deviceHashId, environmentHashId: device.environmentHashId, certificate: device.certificate, refused: false });
      server.emit('connection', conn);
    },
    onRefused(reason, remoteAddress) {
      countHandshakeFailed(ctx, 'https');
      refusals.refused('https', { remoteAddress }, `certificate refused: ${reason}`);
    },
  });
  const { maxConnectionsPerAddress, handshakeRatePerAddress, handshakeBurstPerAddress } = ctx.config.httpsLimits;
  const limits = new AddressLimits({ maxSessionsPerAddress: maxConnectionsPerAddress, handshakeRatePerAddress, handshakeBurstPerAddress });
  admitPerAddress(tcp, limits, (remoteAddress) => {
    ctx.log.debug({ remoteAddress }, 'device connection refused: per-address limit');
  });
  await new Promise<void>((resolve) => tcp.listen(port, resolve));
  return {
    tcp,
    port: () => (tcp.address() as net.AddressInfo).port,
    async close(graceMs) {
      closing = true;
      tcp.close();
      server.closeIdleConnections();
      const deadline = Date.now() + graceMs;
      while (inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      server.closeAllConnections();
      server.close();
      disposeCertificateIdentity(ctx);
      webhooks.close();
      await counterRecorder(ctx).drain();
    },
  };
}

/**
 * Puts per-source-address admission in front of every 'connection' listener of `tcp`: each connection starts a
 * handshake (PSK or certificate), so the token bucket bounds handshakes per second, and the open connections of
 * one address are capped. A connection over either limit is closed before a byte of it is read.
 */
function admitPerAddress(tcp: net.Server, limits: AddressLimits, onRefused: (remoteAddress: string) => void): void {
  const listeners = tcp.listeners('connection') as ((socket: net.Socket) => void)[];
  tcp.removeAllListeners('connection');
  tcp.on('connection', (socket: net.Socket) => {
    const address = socket.remoteAddress ?? '';
    if (!limits.admit(address)) {
      onRefused(address);
      socket.destroy();
      return;
    }
    limits.added(address);
    socket.once('close', () => limits.removed(address));
    for (const listener of listeners) listener.call(tcp, socket);
  });
}

async function handleRequest(
  ctx: AppContext,
  queue: DeviceQueue,
  session: AdmittedDevice,
  conn: PskTlsConnection,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  // firmware downloads are served here, from the image store: no queue, no handler
  const firmwareHashId = firmwareRequestHashId(req.method, req.url);
  if (firmwareHashId) {
    countDeviceEvent(ctx, session.deviceHashId, 'contacts');
    return serveFirmwareOverHttps(ctx, { hashId: session.deviceHashId }, firmwareHashId, req, res);
  }
  const limit = ctx.config.deviceBodyLimitBytes;
  const body = await readBounded(req, res, limit);
  if (body === null) {
    countDeviceEvent(ctx, session.deviceHashId, 'contacts');
    refuseRestOfBody(req, res);
    send(res, 413, { key: 'parameter_error', message: `body exceeds ${limit} bytes` });
    return;
  }
  const url = new URL(req.url ?? '/', 'https://device');
  const request = webRequest({
    url: { protocol: 'https', host: req.headers.host ?? '', path: url.pathname, query: parseQuery(url.searchParams) },
    method: (req.method ?? 'GET').toUpperCase(),
    headers: req.headers as Record<string, string | string[]>,
    body: typedBody(body, req.headers['content-type']),
    ip: conn.remoteAddress,
    pskIdentity: session.pskIdentity,
    certificate: session.certificate ?? null,
  });
  metrics.deviceRequests.inc({ protocol: 'https' });
  const outcome = await queue.addAndWait(
    {
      kind: 'incomingRequest',
      deviceHashId: session.deviceHashId,
      environmentHashId: session.environmentHashId,
      webRequest: request,
      receivedAt: new Date().toISOString(),
    },
    ctx.config.gatewayWaitMs,
  );
  if (outcome.state === 'pending') {
    send(res, 202, { status: 'accepted', message: 'queued; no answer from the handler in time' });
    return;
  }
  if (!outcome.result.answer) {
    send(res, 503, { key: 'unavailable_error', message: 'the request was queued but could not be processed yet' });
    return;
  }
  const answer = outcome.result.answer;
  const { payload, contentType } = encodeAnswerBody(answer.body);
  const headers: Record<string, string | number> = { ...answer.headers, 'content-length': payload.length };
  if (contentType && !Object.keys(answer.headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = contentType;
  res.writeHead(answer.statusCode, headers);
  res.end(payload);
}
