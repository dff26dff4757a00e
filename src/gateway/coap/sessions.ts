/**
 * The coaps device sessions: who the device of each DTLS session is (its PSK identity's device, or its certificate's,
 * looked up once when the session starts), the CoAP endpoint that serves the session's datagrams, and what a kept
 * session carries to the next process (its device and last exchange, the attachment). A certificate session lasts only
 * while its chain is trusted; a kept session stays with the device it was made for.
 */
import type { X509Certificate } from 'node:crypto';
import type { AppContext } from '../../app/context.ts';
import { CoapEndpoint } from '../../coap/index.ts';
import type { CoapEndpointOptions, DedupLimit, Exchange } from '../../coap/index.ts';
import { countDeviceEvent } from '../../connectivity/counters/recorder.ts';
import { onTrustLoaded, trustAnchors } from '../../connectivity/supplier-certificates/trust.ts';
import type { DtlsSession } from '../../dtls/server.ts';
import { verifyChain } from '../../pki/verify.ts';
import { countHandshakeFailed, pskDevice, type AdmittedDevice } from '../admission.ts';
import type { DtlsCluster } from '../coap-cluster.ts';
import { CertificateRefused, identifyCertificateDevice } from '../device-identity.ts';
import type { RefusalLog } from '../refusal-log.ts';
import { diagnostic, json, queryPairs, type DeviceRequests } from './requests.ts';

export interface CoapSessionsOptions {
  /** What every CoAP endpoint shares (timers, body limits, the upload budget); `diagnostic` is this file's own. */
  endpoint: Pick<CoapEndpointOptions, 'piggybackMs' | 'maxBodyBytes' | 'uploadBudget'>;
  /** Message ids remembered over all coaps sessions. */
  dedupLimit: DedupLimit;
  /** One CoAP message must stay one DTLS record. */
  maxMessageBytes: number;
  requests: DeviceRequests;
  /** This node's place in a CID-routed cluster, once joined. */
  cluster(): DtlsCluster | null;
  refusals: RefusalLog;
  malformed(reason: string): void;
  failed(err: Error): void;
}

export interface CoapSessions {
  /** A DTLS session established (or carried on, with the attachment it was kept with): its device looked up, its endpoint made. */
  add(session: DtlsSession, attachment?: Buffer): void;
  /** What the session carries to the next process, once its device is known. */
  attachment(session: DtlsSession): Buffer | undefined;
  /** Whether some session's exchange still waits for its answer. */
  pending(): boolean;
  /** Stops ending certificate sessions on trust changes (the listener is closing). */
  stopTrustCheck(): void;
}

export function coapSessions(ctx: AppContext, o: CoapSessionsOptions): CoapSessions {
  /** The CoAP endpoint of each coaps session (its device known), and the device (null: a refused certificate) */
  const endpoints = new Map<DtlsSession, { endpoint: CoapEndpoint; deviceHashId: string | null }>();

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
        o.refusals.refused('coaps', { remoteAddress: session.remoteAddress }, `certificate refused: ${(err as Error).message}`);
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

  function add(session: DtlsSession, attachment?: Buffer): void {
    const carried = attachment ? coapAttachment(attachment) : undefined;
    // datagrams that arrive while the device is looked up wait (a few) for it
    const early: Buffer[] = [];
    const hold = (d: Buffer) => {
      if (early.length < 16) early.push(d);
    };
    session.on('data', hold);
    sessionDevice(session).then(
      (device) => {
        session.off('data', hold);
        if (!session.established) return; // closed while it was looked up
        // the anchors may have changed while the device was looked up; a kept session stays with the device it was made for
        if (
          !device ||
          (session.peerCertificates.length > 0 && !stillTrusted(session, trustAnchors(ctx))) ||
          (carried && !('refusal' in device) && carried.deviceHashId !== device.deviceHashId)
        ) {
          session.close();
          return;
        }
        if (session.peerCertificates.length > 0) {
          certificateSessions.add(session);
          session.on('close', () => certificateSessions.delete(session));
        }
        const endpoint = new CoapEndpoint({
          ...o.endpoint,
          dedupLimit: o.dedupLimit,
          uploadOwner: () => ('refusal' in device ? session : device.deviceHashId),
          // a body over the limit is a contact the exchange layer answers itself (HTTPS counts its 413 too)
          diagnostic: (code, message) => {
            if (code === '4.13' && !('refusal' in device)) countDeviceEvent(ctx, device.deviceHashId, 'contacts');
            return diagnostic(code, message);
          },
          maxMessageBytes: o.maxMessageBytes,
          send: (d) => {
            // a session closed in the meantime: the device will retransmit on a new one
            if (!session.established) return;
            session.send(d);
            // its records reach this node through another one: once this exchange is over, the session may move there
            if (session.relayStreak > 0) o.cluster()?.answered(session, () => !o.requests.closing && endpoint.settled);
          },
          handler:
            'refusal' in device
              ? async () => json('4.01', { key: 'authentication_error', message: device.refusal })
              : (req) => o.requests.serve(device, req, 'coaps', session.remoteAddress, queryPairs(req.options)),
          ...(carried ? { lastMessageId: carried.lastMessageId, lastExchange: carried.lastExchange } : {}),
        });
        endpoint.on('malformed', o.malformed);
        endpoint.on('failure', o.failed);
        endpoints.set(session, { endpoint, deviceHashId: 'refusal' in device ? null : device.deviceHashId });
        const deliver = (d: Buffer) => {
          // shutting down: a new request is left unanswered, so the device retransmits it (ACK_TIMEOUT, 2-3 s) to
          // whichever node carries its session on next; a 5.03 would make it wait Max-Age (60 s unless told)
          // before it tries again (docs/decisions.md). Retransmissions of requests seen before get their reply, and
          // ACKs of our separate responses still count.
          if (o.requests.closing && isRequest(d) && !endpoint.remembers(d.readUInt16BE(2))) return;
          endpoint.receive(d);
        };
        session.on('data', deliver);
        session.on('close', () => {
          endpoint.close();
          endpoints.delete(session);
        });
        for (const d of early) deliver(d);
      },
      (err: Error) => {
        ctx.log.warn({ err: err.message }, 'coaps session could not be attributed to a device');
        session.close();
      },
    );
  }

  return {
    add,
    // each session's device and CoAP message id go with it to the next process
    attachment(session) {
      const e = endpoints.get(session);
      return e?.deviceHashId
        ? encodeCoapAttachment({ deviceHashId: e.deviceHashId, lastMessageId: e.endpoint.lastMessageId, lastExchange: e.endpoint.lastExchange })
        : undefined;
    },
    pending: () => [...endpoints.values()].some((e) => e.endpoint.pending > 0),
    stopTrustCheck,
  };
}

/** A CoAP request (code class 0, detail 1-31: RFC 7252 §3), not an ACK, RST or response. */
function isRequest(d: Buffer): boolean {
  return d.length >= 4 && d[1] >= 1 && d[1] <= 31;
}

/**
 * What a kept coaps session carries for the CoAP layer of the next process: its device, its last message id, and the
 * last request it answered with the reply (a retransmission that reaches the next process gets that reply again
 * instead of being queued a second time: the device's answer was lost in the hand-over, its report was not).
 * Layout: last message id (2) ‖ device hashId ‖ then, when there is an exchange, 0 ‖ its message id (2) ‖ reply.
 */
interface CoapAttachment {
  deviceHashId: string;
  lastMessageId: number;
  lastExchange?: Exchange;
}

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
