/**
 * The device-facing CoAP listeners and their sockets: `coaps` (CoAP over our DTLS 1.2 server: PSK devices, and
 * certificate devices when the gateway has server credentials; sessions kept in Redis; one node of a CID-routed
 * cluster) and, only when COAP_PORT is set, plain `coap`. What a session's device is lives in sessions.ts, what a
 * request becomes in requests.ts; this file wires them to the sockets and shuts them down in order.
 *
 * Plain CoAP has no handshake to authenticate by, so it is never anonymous: a device names its PSK identity in the
 * Uri-Query `psk-identity=<identity>` (taken out of the query its handler sees) and only identities the operator
 * lists in COAP_PLAIN_IDENTITIES are accepted; everything else gets 4.01. It is meant for development and private
 * networks: anyone who can reach the port can claim a listed identity.
 */
import dgram from 'node:dgram';
import type { AppContext } from '../../app/context.ts';
import { gaugeFrom, metrics } from '../../app/metrics.ts';
import { COAP_DEFAULTS, CoapUdpServer, DedupLimit, UploadBudget } from '../../coap/index.ts';
import type { CoapOption } from '../../coap/index.ts';
import { createDtlsServer } from '../../dtls/server.ts';
import type { DtlsServer, DtlsSession } from '../../dtls/server.ts';
import type { DeviceQueue } from '../../pipeline/queue.ts';
import { countHandshakeFailed, pskDevice, pskKeyLookup } from '../admission.ts';
import { joinDtlsCluster, type DtlsCluster } from '../coap-cluster.ts';
import { dtlsCertificateOptions } from '../dtls-certificates.ts';
import { DtlsStateStore } from '../dtls-session-store.ts';
import { RefusalLog } from '../refusal-log.ts';
import { deviceRequests, diagnostic, json, queryPairs } from './requests.ts';
import { coapSessions } from './sessions.ts';

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

/**
 * The device-facing CoAP listeners: coaps on the DTLS PSK server (the same `addWithPsk` devices as HTTPS) and plain
 * coap when `coapPort` is not null.
 */
export async function startCoapDeviceListener(
  ctx: AppContext,
  queue: DeviceQueue,
  ports: { coapsPort: number; coapPort: number | null },
): Promise<CoapDeviceListener> {
  const requests = deviceRequests(ctx, queue);
  /** This node's place in a CID-routed cluster (DTLS_CLUSTER_PORT), once joined */
  let cluster: DtlsCluster | null = null;
  // unfinished Block1 uploads of all devices together hold at most 64 bodies of the largest size, one device (all
  // its sessions together) what one session may: many sessions of one device cannot crowd the others out
  const uploadBudget = new UploadBudget(64 * ctx.config.deviceBodyLimitBytes, COAP_DEFAULTS.maxUploads * ctx.config.deviceBodyLimitBytes);
  const coapConfig = { piggybackMs: ctx.config.coapPiggybackMs, maxBodyBytes: ctx.config.deviceBodyLimitBytes, diagnostic, uploadBudget };
  const malformed = (protocol: string) => (reason: string) => {
    metrics.coapMalformed.inc({ protocol });
    ctx.log.debug({ protocol, reason }, 'coap datagram dropped');
  };
  const failed = (protocol: string) => (err: Error) => {
    metrics.coapFailures.inc({ protocol });
    ctx.log.error({ protocol, err: err.message, stack: err.stack }, 'coap datagram could not be handled; dropped');
  };
  const refusals = new RefusalLog(ctx.log);
  const sessions = coapSessions(ctx, {
    endpoint: coapConfig,
    // message ids remembered over all coaps sessions (plain coap has a limit of its own)
    dedupLimit: new DedupLimit(COAP_DEFAULTS.maxDedupTotal),
    // one CoAP message must stay one DTLS record: the datagram size less the largest record overhead
    // (header 13, CBC-SHA256 IV + MAC + padding 64, and 32 for the peer's Connection ID)
    maxMessageBytes: ctx.config.dtls.mtu - 13 - 64 - 32,
    requests,
    cluster: () => cluster,
    refusals,
    malformed: malformed('coaps'),
    failed: failed('coaps'),
  });

  // certificate devices (ECDHE-ECDSA) beside the PSK ones; without usable server credentials coaps serves PSK only
  const certificate = await dtlsCertificateOptions(ctx).catch((err: Error) => {
    ctx.log.warn({ err: err.message }, 'coaps has no server certificate: PSK devices only');
    return undefined;
  });
  // sessions and the resumption cache in Redis: a restarted gateway (or another node) carries them on (docs/decisions.md)
  const kept = ctx.config.dtlsKeepSessions
    ? new DtlsStateStore(ctx.redis, {
        prefix: `gridgate:${ctx.config.queueName}:`,
        secretKey: ctx.config.secretKey,
        idleTimeoutMs: ctx.config.dtls.idleTimeoutMs,
        onError: (err) => ctx.log.debug({ err: err.message }, 'dtls session state not written or read'),
      })
    : undefined;
  const dtls = createDtlsServer({
    socket: ports.coapsPort,
    ...ctx.config.dtls,
    ...(certificate ? { certificate } : {}),
    ...(kept ? { keeper: kept, sharedCache: kept } : {}),
    // each session's device and CoAP message id go with it to the next process
    attachment: (session) => sessions.attachment(session),
    lookupPsk: pskKeyLookup(ctx),
  });
  dtls.on('handshakeError', (err: Error, info: { remoteAddress: string; pskIdentity?: string }) => {
    countHandshakeFailed(ctx, 'coaps', info.pskIdentity);
    refusals.refused('coaps', info, err.message);
  });
  dtls.on('session', (session: DtlsSession, attachment?: Buffer) => {
    metrics.dtlsSessions.inc({ origin: session.restored ? 'kept' : session.resumed ? 'resumption' : 'handshake' });
    sessions.add(session, attachment);
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
      return {
        ...json('4.01', {
          key: 'authentication_error',
          message: `plain CoAP needs the Uri-Query ${PLAIN_IDENTITY_QUERY}=<identity> of a device the operator allowed`,
        }),
        refused: true,
      };
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
        return requests.serve(
          device,
          req,
          'coap',
          peer.address,
          pairs.filter(([k]) => k !== PLAIN_IDENTITY_QUERY),
        );
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
      requests.stop();
      sessions.stopTrustCheck();
      const deadline = Date.now() + graceMs;
      const busy = () => requests.inFlight > 0 || sessions.pending() || (plain?.pending ?? 0) > 0;
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
