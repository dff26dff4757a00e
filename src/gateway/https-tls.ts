// One TCP port, two kinds of TLS. The HTTPS device port runs our own TLS-PSK server (src/tls/):
// node:tls cannot do TLS 1.2 PSK with CCM_8. Devices with certificates (and webhook senders, who
// have neither) speak ordinary TLS, which node:tls does well. So each connection's ClientHello is
// peeked: one that offers one of our PSK suites goes to the PSK server, any other to a node:tls
// server with the server certificate, the bytes read put back in front of the stream.
import { X509Certificate } from 'node:crypto';
import type net from 'node:net';
import tls from 'node:tls';
import type { AppContext } from '../app/context.ts';
import { CIPHER_SUITES } from '../tls/index.ts';
import { StreamBuffer } from '../tls/record.ts';
import { CertificateRefused, identifyCertificateDevice, type CertificateDevice } from './device-identity.ts';
import { loadServerCredentials } from '../pki/files.ts';

const PSK_SUITE_IDS: ReadonlySet<number> = new Set(CIPHER_SUITES.map((s) => s.id));
const RECORD_HEADER = 5;
// a ClientHello record never needs more (2^14 plaintext + allowance)
const MAX_PEEK_BYTES = RECORD_HEADER + 18_432;
const PEEK_TIMEOUT_MS = 10_000;

export type ClientHelloPeek = { complete: false } | { complete: true; offersPsk: boolean };

/**
 * Looks at the first TLS record of a connection: complete once the whole record is there;
 * `offersPsk` when it is a ClientHello listing one of `pskSuiteIds`. Anything that is not a
 * well-formed ClientHello is complete and not PSK (node:tls then answers it).
 */
export function peekClientHello(buf: Buffer, pskSuiteIds: ReadonlySet<number> = PSK_SUITE_IDS): ClientHelloPeek {
  if (buf.length < 1) return { complete: false };
  if (buf[0] !== 22) return { complete: true, offersPsk: false };
  if (buf.length < RECORD_HEADER) return { complete: false };
  const length = buf.readUInt16BE(3);
  if (RECORD_HEADER + length > MAX_PEEK_BYTES) return { complete: true, offersPsk: false };
  if (buf.length < RECORD_HEADER + length) return { complete: false };
  const body = buf.subarray(RECORD_HEADER, RECORD_HEADER + length);
  if (body.length < 4 || body[0] !== 1) return { complete: true, offersPsk: false };
  // type(1) length(3) client_version(2) random(32) session_id<0..32> cipher_suites<2..2^16-2>
  let p = 4 + 2 + 32;
  if (p >= body.length) return { complete: true, offersPsk: false };
  p += 1 + body[p];
  if (p + 2 > body.length) return { complete: true, offersPsk: false };
  const end = Math.min(p + 2 + body.readUInt16BE(p), body.length);
  for (let i = p + 2; i + 2 <= end; i += 2) {
    if (pskSuiteIds.has(body.readUInt16BE(i))) return { complete: true, offersPsk: true };
  }
  return { complete: true, offersPsk: false };
}

/** Reads until the first record is complete, puts the bytes back, and tells `route` which server gets the socket. */
function routeByClientHello(socket: net.Socket, route: (offersPsk: boolean) => void): void {
  const input = new StreamBuffer();
  const timer = setTimeout(() => socket.destroy(), PEEK_TIMEOUT_MS);
  const stop = () => {
    clearTimeout(timer);
    socket.off('data', onData);
    socket.off('end', onGone);
    socket.off('error', onGone);
  };
  const onGone = () => {
    stop();
    socket.destroy();
  };
  const onData = (chunk: Buffer) => {
    // linear in the bytes sent however they are split (StreamBuffer), and peekClientHello only looks at the
    // record header until the whole record is in
    input.push(chunk);
    const peek = peekClientHello(input.pending);
    if (!peek.complete) return;
    stop();
    socket.pause();
    socket.unshift(input.pending);
    route(peek.offersPsk);
  };
  socket.on('data', onData);
  socket.on('end', onGone);
  socket.on('error', onGone);
}

/** The client's chain as sent, device certificate first. */
function peerChain(conn: tls.TLSSocket): X509Certificate[] {
  const chain: X509Certificate[] = [];
  const seen = new Set<string>();
  let c: tls.DetailedPeerCertificate | undefined = conn.getPeerCertificate(true);
  while (c?.raw && !seen.has(c.fingerprint256)) {
    seen.add(c.fingerprint256);
    chain.push(new X509Certificate(c.raw));
    c = c.issuerCertificate;
  }
  return chain;
}

const refusals = new WeakMap<object, string>();

/** Why the client certificate of this connection named no device (null: none presented, or it did). */
export function certificateRefusal(conn: object): string | null {
  return refusals.get(conn) ?? null;
}

export interface CertificateTlsOptions {
  /**
   * A certificate-TLS connection ready for HTTP: `device` when its client certificate named one,
   * null without a client certificate (webhooks) or when the certificate named no device
   * (`certificateRefusal(conn)` says why). Chains that are untrusted or expired never get here.
   */
  onConnection(conn: tls.TLSSocket, device: CertificateDevice | null): void;
  /** a handshake or chain verification failed */
  onRefused(reason: string, remoteAddress: string | undefined): void;
}

/**
 * Puts certificate TLS on the port of `pskServer` (a createPskTlsServer server): its connections are
 * routed by ClientHello from now on. Returns the node:tls server (`requestCert`, client chains
 * verified by identifyCertificateDevice, not by OpenSSL).
 */
export function serveCertificateTls(ctx: AppContext, pskServer: net.Server, opts: CertificateTlsOptions): tls.Server {
  const creds = loadServerCredentials(ctx.config);
  const certServer = tls.createServer({
    key: creds.key,
    cert: creds.cert,
    requestCert: true,
    rejectUnauthorized: false,
    minVersion: 'TLSv1.2',
    handshakeTimeout: PEEK_TIMEOUT_MS,
  });
  certServer.on('secureConnection', (conn: tls.TLSSocket) => {
    const chain = peerChain(conn);
    if (chain.length === 0) {
      opts.onConnection(conn, null);
      return;
    }
    identifyCertificateDevice(ctx, chain).then(
      (device) => {
        if (!conn.destroyed) opts.onConnection(conn, device);
      },
      (err: Error) => {
        if (err instanceof CertificateRefused && err.stage === 'identifier') {
          // the chain is good but names no device: requests get 401 with the reason (webhooks still work)
          refusals.set(conn, err.message);
          if (!conn.destroyed) opts.onConnection(conn, null);
          return;
        }
        opts.onRefused(err.message, conn.remoteAddress);
        conn.destroy();
      },
    );
  });
  certServer.on('tlsClientError', (err: Error, conn: tls.TLSSocket) => opts.onRefused(err.message, conn.remoteAddress));
  const pskListeners = pskServer.listeners('connection') as ((socket: net.Socket) => void)[];
  pskServer.removeAllListeners('connection');
  pskServer.on('connection', (socket: net.Socket) =>
    routeByClientHello(socket, (offersPsk) => {
      if (offersPsk) {
        for (const listener of pskListeners) listener.call(pskServer, socket);
        socket.resume();
      } else {
        certServer.emit('connection', socket);
      }
    }),
  );
  return certServer;
}
