/**
 * The device-facing CoAP listeners: `coaps` (CoAP over our DTLS 1.2 PSK server) and, only when COAP_PORT is set,
 * plain `coap`. Each request becomes a WebRequest, is queued durably like an HTTPS one, and is answered with what the
 * device type's handler returned, its status mapped to a CoAP code (RFC 8075) and its body type to a Content-Format.
 *
 * Plain CoAP has no handshake to authenticate by, so it is never anonymous: a device names its PSK identity in the
 * Uri-Query `psk-identity=<identity>` (taken out of the query its handler sees) and only identities the operator
 * lists in COAP_PLAIN_IDENTITIES are accepted; everything else gets 4.01. It is meant for development and private
 * networks: anyone who can reach the port can claim a listed identity.
 */
import type { X509Certificate } from 'node:crypto';
import dgram from 'node:dgram';
import type { AppContext } from '../app/context.ts';
import { COAP_DEFAULTS, CoapEndpoint, CoapUdpServer, ContentFormat, DedupLimit, UploadBudget, encodeUint, optionText, stringOptions, uintOption } from '../coap/index.ts';
import type { CoapOption, CoapRequest, CoapResponse, Exchange } from '../coap/index.ts';
import { countDeviceEvent } from '../connectivity/counters/recorder.ts';
import { createDtlsServer } from '../dtls/server.ts';
import { DtlsStateStore } from './dtls-session-store.ts';
import type { DtlsServer, DtlsSession } from '../dtls/server.ts';
import type { DeviceAnswer } from '../pipeline/jobs.ts';
import { CertificateRefused, identifyCertificateDevice } from './device-identity.ts';
import { dtlsCertificateOptions } from './dtls-certificates.ts';
import { onTrustLoaded, trustAnchors } from '../connectivity/supplier-certificates/trust.ts';
import { verifyChain } from '../pki/verify.ts';
import type { DeviceQueue } from '../pipeline/queue.ts';
import { coapFirmwareHashId, firmwareOfferOptions, serveFirmwareOverCoap } from './firmware.ts';
import { gaugeFrom, metrics } from '../app/metrics.ts';
import { joinDtlsCluster, type DtlsCluster } from './coap-cluster.ts';
import { RefusalLog } from './refusal-log.ts';
import { countHandshakeFailed, countRefusedContact, pskDevice, pskKeyLookup, REFUSED_MESSAGE, type AdmittedDevice } from './admission.ts';
import { encodeAnswerBody, parseQuery, typedBody, webRequest } from './web-request.ts';

export interface CoapDeviceListener {
  dtls: DtlsServer;
  udp: dgram.Socket | null;
  coapsPort(): number;
  coapPort(): number | null;
  /** Leaves new requests unanswered (plain coap: 5.03), lets requests in flight get their answers (bounded by `graceMs`), keeps every session in Redis (or closes it), then leaves the cluster. */
  close(graceMs: number): Promise<void>;
}

/** The Uri-Query parameter a plain-CoAP device names its PSK identity with. */
export const PLAIN_IDENTITY_QUERY = 'psk-identity';

const STATUS_TO_CODE: Record<number, string> = {
  200: '2.05', 201: '2.01', 202: '2.04', 204: '2.04', 400: '4.00', 401: '4.01', 402: '4.02', 403: '4.03', 404: '4.04', 405: '4.05',
  406: '4.06', 408: '4.08', 409: '4.09', 412: '4.12', 413: '4.13', 415: '4.15', 422: '4.22', 429: '4.29',
  500: '5.00', 501: '5.01', 502: '5.02', 503: '5.03', 504: '5.04',
};

/** An HTTP status as a CoAP response code (RFC 8075 §7); statuses without an equivalent fall back to their class. */
export function coapCode(status: number): string {
  return STATUS_TO_CODE[status] ?? (status >= 200 && status < 300 ? '2.05' : status >= 400 && status < 500 ? '4.00' : '5.00');
}

const BODY_FORMAT: Record<string, number> = { json: ContentFormat.json, string: ContentFormat.text, hex: ContentFormat.octetStream };
const FORMAT_MEDIA_TYPE: Record<number, string> = { [ContentFormat.json]: 'application/json', [ContentFormat.text]: 'text/plain' };
/** Options that only frame the exchange; the handler sees the whole request instead. */
const TRANSPORT_OPTIONS = new Set(['Uri-Path', 'Uri-Query', 'Block1', 'Block2', 'Size1', 'Size2']);

function json(code: string, body: unknown): CoapResponse {
  return { code, options: [{ name: 'Content-Format', value: encodeUint(ContentFormat.json) }], payload: Buffer.from(JSON.stringify(body)) };
}

/** Errors of the exchange layer (4.13 and friends) in the service's `{ key, message }` shape. */
function diagnostic(code: string, message: string): { payload: Buffer; options: CoapOption[] } {
  const key = code.startsWith('4.') ? 'parameter_error' : 'unavailable_error';
  return { payload: Buffer.from(JSON.stringify({ key, message })), options: [{ name: 'Content-Format', value: encodeUint(ContentFormat.json) }] };
}

function answerResponse(answer: DeviceAnswer): CoapResponse {
  const { payload } = encodeAnswerBody(answer.body);
  const options: CoapOption[] = answer.body ? [{ name: 'Content-Format', value: encodeUint(BODY_FORMAT[answer.body.type] ?? ContentFormat.json) }] : [];
  options.push(...firmwareOfferOptions(answer.headers));
  return { code: coapCode(answer.statusCode), options, payload };
}

/**
 * The device-facing CoAP listeners: coaps on the DTLS PSK server (the same `addWithPsk` devices as HTTPS) and plain
 * coap when `coapPort` is not null.
 */
export async function startCoapDeviceListener(ctx: AppContext, queue: DeviceQueue, ports: { coapsPort: number; coapPort: number | null }): Promise<CoapDeviceListener> {
  let closing = false;
  let inFlight = 0;
  /** The CoAP endpoint of each coaps session (its device known), and the device (null: a refused certificate) */
  const endpoints = new Map<DtlsSession, { endpoint: CoapEndpoint; deviceHashId: string | null }>();
  /** This node's place in a CID-routed cluster (DTLS_CLUSTER_PORT), once joined */
  let cluster: DtlsCluster | null = null;
  // unfinished Block1 uploads of all devices together hold at most 64 bodies of the largest size, one device (all
  // its sessions together) what one session may: many sessions of one device cannot crowd the others out
  const uploadBudget = new UploadBudget(64 * ctx.config.deviceBodyLimitBytes, COAP_DEFAULTS.maxUploads * ctx.config.deviceBodyLimitBytes);
  const coapConfig = { piggybackMs: ctx.config.coapPiggybackMs, maxBodyBytes: ctx.config.deviceBodyLimitBytes, diagnostic, uploadBudget };
  // message ids remembered over all coaps sessions (plain coap has a limit of its own)
  const dedupLimit = new DedupLimit(COAP_DEFAULTS.maxDedupTotal);
  const malformed = (protocol: string) => (reason: string) => {
    metrics.coapMalformed.inc({ protocol });
    ctx.log.debug({ protocol, reason }, 'coap datagram dropped');
  };
  const failed = (protocol: string) => (err: Error) => {
    metrics.coapFailures.inc({ protocol });
    ctx.log.error({ protocol, err: err.message, stack: err.stack }, 'coap datagram could not be handled; dropped');
  };

  async function serve(device: AdmittedDevice, req: CoapRequest, protocol: 'coaps' | 'coap', ip: string, query: [string, string][]): Promise<CoapResponse> {
    if (closing) return json('5.03', { key: 'unavailable_error', message: 'the gateway is shutting down; try again' });
    if (device.refused) {
      countRefusedContact(ctx, protocol, device.deviceHashId);
      return json('4.03', { key: 'right_error', message: REFUSED_MESSAGE });
    }
    inFlight++;
    try {
      return await handleRequest(ctx, queue, device, req, protocol, ip, query);
    } catch (err) {
      ctx.log.error({ err: (err as Error).message }, 'device request failed');
      return json('5.03', { key: 'unavailable_error', message: 'the request could not be queued; try again' });
    } finally {
      inFlight--;
    }
  }

  // certificate devices (ECDHE-ECDSA) beside the PSK ones; without usable server credentials coaps serves PSK only
  const certificate = await dtlsCertificateOptions(ctx).catch((err: Error) => {
    ctx.log.warn({ err: err.message }, 'coaps has no server certificate: PSK devices only');
    return undefined;
  });
  // sessions and the resumption cache in Redis: a restarted gateway (or another node) carries them on (docs/decisions.md)
  const kept = ctx.config.dtlsKeepSessions
    ? new DtlsStateStore(ctx.redis, {
      prefix: `gridgate:${ctx.config.queueName}:`, secretKey: ctx.config.secretKey, idleTimeoutMs: ctx.config.dtls.idleTimeoutMs,
      onError: (err) => ctx.log.debug({ err: err.message }, 'dtls session state not written or read'),
    })
    : undefined;
  const dtls = createDtlsServer({
    socket: ports.coapsPort,
    ...ctx.config.dtls,
    ...(certificate ? { certificate } : {}),
    ...(kept ? { keeper: kept, sharedCache: kept } : {}),
    // each session's device and CoAP message id go with it to the next process
    attachment: (session) => {
      const e = endpoints.get(session);
      return e?.deviceHashId ? encodeCoapAttachment({ deviceHashId: e.deviceHashId, lastMessageId: e.endpoint.lastMessageId, lastExchange: e.endpoint.lastExchange }) : undefined;
    },
    lookupPsk: pskKeyLookup(ctx),
  });
  const refusals = new RefusalLog(ctx.log);
  dtls.on('handshakeError', (err: Error, info: { remoteAddress: string; pskIdentity?: string }) => {
    countHandshakeFailed(ctx, 'coaps', info.pskIdentity);
    refusals.refused('coaps', info, err.message);
  });

  /** The device a session stands for; a refusal (every request gets 4.01 with it); or null: the session is closed. */
  async function sessionDevice(session: DtlsSession): Promise<AdmittedDevice | { refusal: string } | null> {
    if (session.peerCertificates.length > 0) {
      try {
        const d = await identifyCertificateDevice(ctx, session.peerCertificates);
        return { deviceHashId: d.deviceHashId, environmentHashId: d.environmentHashId, certificate: d.certificate, refused: false };
      } catch (err) {
        // a good chain whose identifier names no device is told why (as HTTPS does); an untrusted one is closed
        if (err instanceof CertificateRefused && err.stage === 'identifier') return { refusal: err.message };
        countHandshakeFailed(ctx, 'coaps');
        refusals.refused('coaps', { remoteAddress: session.remoteAddress }, `certificate refused: ${(err as Error).message}`);
        return null;
      }
    }
    return pskDevice(ctx, session.pskIdentity ?? '');
  }

  // a certificate session lasts only while its chain is trusted: a deleted supplier certificate ends its devices' sessions
  const certificateSessions = new Set<DtlsSession>();
  const stillTrusted = (session: DtlsSession, anchors: readonly X509Certificate[]) => verifyChain(session.peerCertificates, anchors).ok;
  const stopTrustCheck = onTrustLoaded(ctx, (trust) => {
    for (const session of certificateSessions) {
      if (!stillTrusted(session, trust.anchors)) session.close();
    }
  });

  dtls.on('session', (session: DtlsSession, attachment?: Buffer) => {
    metrics.dtlsSessions.inc({ origin: session.restored ? 'kept' : session.resumed ? 'resumption' : 'handshake' });
    const carried = attachment ? coapAttachment(attachment) : undefined;
    // datagrams that arrive while the device is looked up wait (a few) for it
    const early: Buffer[] = [];
    const hold = (d: Buffer) => { if (early.length < 16) early.push(d); };
    session.on('data', hold);
    sessionDevice(session).then((device) => {
      session.off('data', hold);
      if (!session.established) return; // closed while it was looked up
      // the anchors may have changed while the device was looked up; a kept session stays with the device it was made for
      if (!device || (session.peerCertificates.length > 0 && !stillTrusted(session, trustAnchors(ctx)))
        || (carried && !('refusal' in device) && carried.deviceHashId !== device.deviceHashId)) {
        session.close();
        return;
      }
      if (session.peerCertificates.length > 0) {
        certificateSessions.add(session);
        session.on('close', () => certificateSessions.delete(session));
      }
      const endpoint = new CoapEndpoint({
        ...coapConfig,
        dedupLimit,
        uploadOwner: () => ('refusal' in device ? session : device.deviceHashId),
        // a body over the limit is a contact the exchange layer answers itself (HTTPS counts its 413 too)
        diagnostic: (code, message) => {
          if (code === '4.13' && !('refusal' in device)) countDeviceEvent(ctx, device.deviceHashId, 'contacts');
          return diagnostic(code, message);
        },
        // one CoAP message must stay one DTLS record: the datagram size less the largest record overhead
        // (header 13, CBC-SHA256 IV + MAC + padding 64, and 32 for the peer's Connection ID)
        maxMessageBytes: ctx.config.dtls.mtu - 13 - 64 - 32,
        send: (d) => {
          // a session closed in the meantime: the device will retransmit on a new one
          if (!session.established) return;
          session.send(d);
          // its records reach this node through another one: once this exchange is over, the session may move there
          if (session.relayStreak > 0) cluster?.answered(session, () => !closing && endpoint.settled);
        },
        handler: 'refusal' in device
          ? async () => json('4.01', { key: 'authentication_error', message: device.refusal })
          : (req) => serve(device, req, 'coaps', session.remoteAddress, queryPairs(req.options)),
        ...(carried ? { lastMessageId: carried.lastMessageId, lastExchange: carried.lastExchange } : {}),
      });
      endpoint.on('malformed', malformed('coaps'));
      endpoint.on('failure', failed('coaps'));
      endpoints.set(session, { endpoint, deviceHashId: 'refusal' in device ? null : device.deviceHashId });
      const deliver = (d: Buffer) => {
        // shutting down: a new request is left unanswered, so the device retransmits it (ACK_TIMEOUT, 2-3 s) to
        // whichever node carries its session on next; a 5.03 would make it wait Max-Age (60 s unless told)
        // before it tries again (docs/decisions.md). Retransmissions of requests seen before get their reply, and
        // ACKs of our separate responses still count.
        if (closing && isRequest(d) && !endpoint.remembers(d.readUInt16BE(2))) return;
        endpoint.receive(d);
      };
      session.on('data', deliver);
      session.on('close', () => {
        endpoint.close();
        endpoints.delete(session);
      });
      for (const d of early) deliver(d);
    }, (err: Error) => {
      ctx.log.warn({ err: err.message }, 'coaps session could not be attributed to a device');
      session.close();
    });
  });
  dtls.on('error', (err: Error) => ctx.log.warn({ err: err.message }, 'coaps socket error'));
  dtls.on('keeperError', (err: Error) => ctx.log.debug({ err: err.message }, 'dtls session lease not renewed'));
  gaugeFrom('gridgate_dtls_sessions', 'Established DTLS sessions', [], () => [[{}, dtls.sessionCount]]);
  gaugeFrom('gridgate_dtls_handshakes_in_progress', 'DTLS handshakes in progress (past the cookie exchange)', [], () => [[{}, dtls.handshakeCount]]);
  await listening(dtls.socket);
  cluster = await joinDtlsCluster(ctx, dtls);

  let udp: dgram.Socket | null = null;
  let plain: CoapUdpServer | null = null;
  if (ports.coapPort !== null) {
    const allowed = new Set(ctx.config.coapPlainIdentities);
    udp = dgram.createSocket('udp4');
    udp.bind(ports.coapPort);
    await listening(udp);
    udp.on('error', (err) => ctx.log.warn({ err: err.message }, 'coap socket error'));
    const refuse = () => {
      countHandshakeFailed(ctx, 'coap');
      return { ...json('4.01', { key: 'authentication_error', message: `plain CoAP needs the Uri-Query ${PLAIN_IDENTITY_QUERY}=<identity> of a device the operator allowed` }), refused: true };
    };
    const plainIdentity = (options: CoapOption[]) => queryPairs(options).find(([k]) => k === PLAIN_IDENTITY_QUERY)?.[1];
    plain = new CoapUdpServer({
      ...coapConfig,
      socket: udp,
      // before any block is buffered: only listed identities get that far
      admit: (req) => (allowed.has(plainIdentity(req.options) ?? '') ? null : refuse()),
      uploadOwner: (options) => `identity ${plainIdentity(options) ?? ''}`,
      handler: async (req, peer) => {
        const pairs = queryPairs(req.options);
        const identity = plainIdentity(req.options) ?? '';
        const device = await pskDevice(ctx, identity);
        if (!device) return refuse();
        return serve(device, req, 'coap', peer.address, pairs.filter(([k]) => k !== PLAIN_IDENTITY_QUERY));
      },
    });
    plain.on('malformed', malformed('coap'));
    plain.on('failure', failed('coap'));
  }

  return {
    dtls,
    udp,
    coapsPort: () => dtls.address().port,
    coapPort: () => (udp ? udp.address().port : null),
    async close(graceMs) {
      closing = true;
      stopTrustCheck();
      const deadline = Date.now() + graceMs;
      const busy = () => inFlight > 0 || [...endpoints.values()].some((e) => e.endpoint.pending > 0) || (plain?.pending ?? 0) > 0;
      while (busy() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      plain?.close();
      const saved = await dtls.suspend().catch((err: Error) => {
        ctx.log.warn({ err: err.message }, 'coaps sessions could not be kept: their devices will handshake again');
        return 0;
      });
      if (saved > 0) ctx.log.info({ sessions: saved }, 'coaps sessions kept for the next process');
      // only now that the sessions are in Redis: the other nodes hear the leave at once and claim them from there
      await cluster?.close();
      if (udp) await new Promise<void>((resolve) => udp!.close(() => resolve()));
    },
  };
}

/** A CoAP request (code class 0, detail 1-31: RFC 7252 §3), not an ACK, RST or response. */
function isRequest(d: Buffer): boolean {
  return d.length >= 4 && d[1] >= 1 && d[1] <= 31;
}

function listening(socket: dgram.Socket): Promise<void> {
  return new Promise((resolve, reject) => {
    try {
      socket.address();
      resolve();
      return;
    } catch {
      // not bound yet
    }
    const onError = (err: Error) => reject(err);
    socket.once('error', onError);
    socket.once('listening', () => {
      socket.off('error', onError);
      resolve();
    });
  });
}

/**
 * What a kept coaps session carries for the CoAP layer of the next process: its device, its last message id, and the
 * last request it answered with the reply (a retransmission that reaches the next process gets that reply again
 * instead of being queued a second time: the device's answer was lost in the hand-over, its report was not).
 * Layout: last message id (2) ‖ device hashId ‖ then, when there is an exchange, 0 ‖ its message id (2) ‖ reply.
 */
interface CoapAttachment { deviceHashId: string; lastMessageId: number; lastExchange?: Exchange }

function encodeCoapAttachment(a: CoapAttachment): Buffer {
  const id = Buffer.from(a.deviceHashId, 'utf8');
  const head = Buffer.allocUnsafe(2);
  head.writeUInt16BE(a.lastMessageId & 0xffff, 0);
  if (!a.lastExchange) return Buffer.concat([head, id]);
  const exchange = Buffer.allocUnsafe(3);
  exchange[0] = 0; // never in a hashId
  exchange.writeUInt16BE(a.lastExchange.messageId, 1);
  return Buffer.concat([head, id, exchange, a.lastExchange.reply]);
}

function coapAttachment(b: Buffer): CoapAttachment | undefined {
  if (b.length <= 2) return undefined;
  const end = b.indexOf(0, 2);
  const lastMessageId = b.readUInt16BE(0);
  if (end < 0 || end + 3 > b.length) return { lastMessageId, deviceHashId: b.subarray(2).toString('utf8') };
  return {
    lastMessageId,
    deviceHashId: b.subarray(2, end).toString('utf8'),
    lastExchange: { messageId: b.readUInt16BE(end + 1), reply: Buffer.from(b.subarray(end + 3)) },
  };
}

/** Uri-Query options as key/value pairs (`k=v`; a bare `k` has the value ''). */
function queryPairs(options: CoapOption[]): [string, string][] {
  return stringOptions(options, 'Uri-Query').map((q) => {
    const i = q.indexOf('=');
    return i < 0 ? [q, ''] : [q.slice(0, i), q.slice(i + 1)];
  });
}

async function handleRequest(ctx: AppContext, queue: DeviceQueue, device: AdmittedDevice, req: CoapRequest, protocol: 'coaps' | 'coap', ip: string, query: [string, string][]): Promise<CoapResponse> {
  // firmware downloads are served here, from the image store: no queue, no handler
  const firmwareHashId = coapFirmwareHashId(req);
  if (firmwareHashId) {
    // a contact the gateway answers itself, as over HTTPS (Block2 blocks served from the endpoint's copy are part of it)
    countDeviceEvent(ctx, device.deviceHashId, 'contacts');
    return serveFirmwareOverCoap(ctx, { hashId: device.deviceHashId }, firmwareHashId, req);
  }
  const headers: Record<string, string | string[]> = {};
  for (const o of req.options) {
    if (TRANSPORT_OPTIONS.has(o.name)) continue;
    const name = o.name.toLowerCase();
    const prev = headers[name];
    const value = optionText(o);
    headers[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  const format = uintOption(req.options, 'Content-Format');
  const request = webRequest({
    url: { protocol, host: stringOptions(req.options, 'Uri-Host')[0] ?? '', path: `/${stringOptions(req.options, 'Uri-Path').join('/')}`, query: parseQuery(query) },
    method: req.method,
    headers,
    body: typedBody(req.payload, format === undefined ? undefined : FORMAT_MEDIA_TYPE[format]),
    ip,
    ...(device.pskIdentity !== undefined ? { pskIdentity: device.pskIdentity } : {}),
    certificate: device.certificate ?? null,
  });
  metrics.deviceRequests.inc({ protocol });
  const outcome = await queue.addAndWait({
    kind: 'incomingRequest', deviceHashId: device.deviceHashId, environmentHashId: device.environmentHashId,
    webRequest: request, receivedAt: new Date().toISOString(),
  }, ctx.config.gatewayWaitMs);
  // HTTPS says 202; CoAP has no "accepted": 2.04 with the same body as the 202
  if (outcome.state === 'pending') return json('2.04', { status: 'accepted', message: 'queued; no answer from the handler in time' });
  if (!outcome.result.answer) return json('5.03', { key: 'unavailable_error', message: 'the request was queued but could not be processed yet' });
  return answerResponse(outcome.result.answer);
}
