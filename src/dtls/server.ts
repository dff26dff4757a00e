/**
 * DTLS 1.2 server (RFC 6347) for PSK and certificate devices, on node:dgram and node:crypto, reusing the TLS 1.2
 * primitives in `../tls/` (PRF and key schedule, message codecs, the CCM_8 / GCM / CBC-SHA256 PSK suites, and
 * ecdhe-ecdsa.ts / x509-chain.ts for the certificate suites).
 *
 * Suites in preference order: PSK CCM_8, GCM, CBC-SHA256, then — only when `certificate` is configured —
 * ECDHE_ECDSA CCM_8 and GCM (ECDHE on x25519 when offered, else secp256r1; ECDSA P-256 server key; client
 * certificate required, its chain checked against `trustAnchors()` at each handshake and before each resumption).
 * Resumption by session id: PSK sessions only after the identity's key was looked up again and is unchanged.
 *
 * Layers, each in its own module:
 *   server.ts   datagrams in and out, stateless cookie check, limits (handshakes, sessions, per source address:
 *               sessions and a handshake token bucket), and which module a datagram goes to
 *   connection-table.ts  which association a datagram is for: by address:port, restarts of an address:port, by CID
 *   cookie.ts   HMAC cookie with a rotating secret; flights/flight2.ts sends HelloVerifyRequest
 *   session.ts  one association, the connection: record dispatch, application data, alerts, close and idleness;
 *               migration.ts  where its answers go (CID migration, relays)   write-lease.ts  a kept session's lease
 *               of write sequence numbers   settled.ts  what an established session keeps of its handshake
 *   handshaker.ts  the handshake state machine: PSK look-ups, key schedule, transcript, flights and retransmission
 *   flights/    what the server sends: flight 2 (HelloVerifyRequest), 4 (ServerHello … ServerHelloDone; the
 *               certificate messages in flight4-certificate.ts), 4b in handshaker.ts (resumption: ServerHello, CCS,
 *               Finished), 6 (CCS, Finished), packed into datagrams by datagrams.ts; and what it checks of the
 *               client's flight 5: flight5-psk.ts (the identity, a stand-in key for an unknown one),
 *               flight5-certificate.ts (chain, CertificateVerify), flight5-finished.ts
 *   kept-sessions.ts  kept sessions: written out, leases renewed, taken over from the keeper; shared-cache look-ups
 *   cluster/hand-over.ts  the CidRouter of a cluster node, and the hand-over of a session to another node
 *   session-cache.ts  resumption by session id (bounded, expiring; RFC 7627 §5.3 EMS rules in flights/flight4.ts)
 *   session-state.ts / session-store.ts  an established session as bytes, kept sealed in Redis for the next process
 *               or another node (and the shared resumption cache)        session-events.ts  a session's listeners
 *   limits.ts   per-source-address admission          cid.ts  RFC 9146 Connection ID: extension, tls12_cid records
 *   handshake.ts  handshake header, fragmentation, reassembly    record.ts / replay.ts  records, epochs, anti-replay
 *
 * Before a ClientHello carries a valid cookie the server keeps nothing and sends only a HelloVerifyRequest no
 * larger than the ClientHello, so a spoofed source address costs neither memory nor amplification. Per-address
 * limits are checked only after the cookie, so a spoofed flood cannot exhaust someone else's allowance. When every
 * handshake slot is taken, a handshake from an address holding fewer takes the oldest slot of the address holding the
 * most (limits.ts HandshakeSlots): hosts that pass the cookie check and stall cannot lock other addresses out.
 *
 * Cluster (cluster/, only when routeCids() was called; the server's side in cluster/hand-over.ts): CIDs name the
 * node, and a tls12_cid record of a CID no session here holds goes to the CidRouter, which forwards it to its node;
 * receiveRelayed() takes such records from the others.
 *
 * Connection ID: offered by the client → an 8-byte CID is issued (every suite: AEAD and MAC-then-encrypt), records
 * of type tls12_cid find their session by CID whatever their source, and an authentic record newer than any before
 * from another address/port moves the session there ('migrate' on the session); answers follow it. A device can
 * put any source address on its own records, so a move counts against the new address's cap and never ends the
 * session that holds the new address:port.
 *
 * A ClientHello with a valid cookie from the address:port of an established session starts a new handshake beside
 * it (RFC 6347 §4.2.8): a cookie stays valid for a minute or two and proves nothing about the device, so the old
 * session is replaced only when the new handshake completes.
 *
 * Kept sessions (with a `keeper`, session-store.ts; the server's side in kept-sessions.ts): each completed handshake's
 * state is written out; `suspend()` writes every session's latest state and lets them go without a word to the peers;
 * a record for a CID or address:port this process does not know is held while the session is looked for there
 * (`takeOverSession`), then handled as if the session had always been here.
 *
 * Limits of this implementation: a first ClientHello must fit one record (it is not reassembled statelessly);
 * renegotiation is refused (no_renegotiation warning); no session tickets (RFC 5077); DTLS 1.3 is not spoken.
 */
import dgram from 'node:dgram';
import { KeyObject, X509Certificate, createPrivateKey, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { AlertDescription, AlertLevel, TlsAlert } from '../tls/alert.ts';
import { HandshakeType, parseClientHello } from '../tls/messages.ts';
import { CIPHER_SUITES } from '../tls/suites/index.ts';
import { ECDHE_ECDSA_SUITES } from '../tls/ecdhe-ecdsa.ts';
import { chainStillValid } from '../tls/x509-chain.ts';
import type { ServerCertificate } from './flights/flight4-certificate.ts';
import { CONTENT_TYPE_TLS12_CID, SERVER_CID_LENGTH } from './cid.ts';
import { CookieSecrets } from './cookie.ts';
import { helloVerifyRequestDatagram } from './flights/flight2.ts';
import { parseHandshakeFragments } from './handshake.ts';
import { ContentType, DTLS10, encodeRecord, parseDatagram } from './record.ts';
import type { DtlsRecord } from './record.ts';
import { AddressLimits, DTLS_DEFAULTS, HandshakeSlots } from './limits.ts';
import type { DtlsLimits } from './limits.ts';
import { DtlsSession } from './session.ts';
import { ConnectionTable } from './connection-table.ts';
import { KeptSessions } from './kept-sessions.ts';
import { ClusterHandOver } from './cluster/hand-over.ts';
import type { CidRouter } from './cluster/hand-over.ts';
import { SessionCache } from './session-cache.ts';
import type { PeerRoute, Relay, SessionConfig, SessionHost, KeptStart } from './session.ts';
import type { SharedSessionCache } from './session-cache.ts';
import type { SessionKeeper } from './session-keeper.ts';

export { DtlsSession };
export type { CidRouter };

export interface DtlsServerOptions {
  /** A bound (or to-be-bound) UDP socket, or a port to bind on `host`. Default: port 0. */
  socket?: dgram.Socket | number;
  /** Address to bind when `socket` is a port. Default '0.0.0.0'. */
  host?: string;
  lookupPsk(identity: string): Promise<Buffer | null>;
  /**
   * Server certificate for the ECDHE_ECDSA suites (offered only when given; PSK suites stay preferred): an EC P-256
   * private key, its certificate chain (server certificate first; X509Certificate objects or PEM), and the trust
   * anchors client chains must lead to — a function, called at each check, so anchors can change at runtime.
   */
  certificate?: {
    key: KeyObject | string | Buffer;
    chain: Array<X509Certificate | string | Buffer> | string;
    trustAnchors: () => X509Certificate[];
  };
  /** Largest datagram the server sends. Default: DTLS_DEFAULTS (limits.ts), as every limit below. */
  mtu?: number;
  /** A handshake not complete after this long is abandoned. */
  handshakeTimeoutMs?: number;
  /** Established sessions at most; new handshakes beyond it are dropped. */
  maxSessions?: number;
  /** Handshakes in progress at most. */
  maxHandshakes?: number;
  /** A session with no authentic record for this long is closed. */
  idleTimeoutMs?: number;
  /** Cookie secret rotation period. Default 60 000 ms. */
  cookieRotationMs?: number;
  /**
   * Sessions kept for resumption by session id in this process at most (the oldest go first); 0 disables resumption.
   * Default 10 000; with a `sharedCache` 1 000 (a front for the recent ids: the shared cache holds them all).
   */
  sessionCacheSize?: number;
  /** A cached session can be resumed for this long after its full handshake. Default 86 400 000 ms (24 h). */
  sessionLifetimeMs?: number;
  /** Handshakes in progress + sessions one source IP address may hold; more ClientHellos are dropped. */
  maxSessionsPerAddress?: number;
  /** Handshakes per second one source IP address may start, sustained (token bucket refill). */
  handshakeRatePerAddress?: number;
  /** Handshakes one source IP address may start in a burst (token bucket size). */
  handshakeBurstPerAddress?: number;
  /** Receive buffer of the socket the server binds itself (a given socket is left as it is). */
  receiveBufferBytes?: number;
  /** Keeps established sessions beyond this process (session-store.ts); without it they live and die here. */
  keeper?: SessionKeeper;
  /** The resumption cache shared with the other nodes of the deployment (session-store.ts). */
  sharedCache?: SharedSessionCache;
  /** Bytes of the application above kept with a session (e.g. its device); given back with a session carried on. */
  attachment?(session: DtlsSession): Buffer | undefined;
}

export interface HandshakeErrorInfo {
  remoteAddress: string;
  remotePort: number;
  pskIdentity?: string;
  /** Subject of the device certificate a refused client sent (certificate suites). */
  certificateSubject?: string;
}

/** The configurable limits come from DTLS_DEFAULTS, the same object app/config.ts takes its defaults from. */
const DEFAULTS = {
  ...DTLS_DEFAULTS,
  cookieRotationMs: 60_000,
  sessionCacheSize: 10_000,
  sharedCacheFront: 1_000,
  sessionLifetimeMs: 86_400_000,
  initialRetransmitMs: 1_000,
  maxRetransmitMs: 60_000,
};

/**
 * Emits 'listening', 'session' (session: DtlsSession, after a completed handshake, or carried on from a kept state:
 * then its `attachment` bytes are the second argument), 'handshakeError' (err: Error, info: HandshakeErrorInfo),
 * 'keeperError' (err: the keeper could not be reached; the session carries on) and 'error' (socket errors).
 */
export class DtlsServer extends EventEmitter {
  readonly socket: dgram.Socket;
  /** The limits in force: the options given, DTLS_DEFAULTS for the rest. */
  readonly limits: Readonly<DtlsLimits>;
  readonly #config: SessionConfig;
  readonly #maxSessions: number;
  readonly #maxHandshakes: number;
  readonly #limits: AddressLimits;
  readonly #maxSessionsPerAddress: number;
  readonly #cookies = new CookieSecrets();
  readonly #rotation: NodeJS.Timeout;
  /** One sweep for all sessions instead of a timer each: closes those idle longer than idleTimeoutMs. */
  readonly #idleSweep: NodeJS.Timeout;
  /** Every association the server counts (handshakes and sessions), wherever it is keyed. */
  readonly #live = new Set<DtlsSession>();
  /** Which association a datagram is for: by address:port, restarts of an address:port, by Connection ID. */
  readonly #table = new ConnectionTable();
  /** Kept sessions (kept-sessions.ts): written out, their leases renewed, taken over from the keeper. */
  readonly #kept: KeptSessions;
  /** The cluster's CidRouter and the hand-over of sessions to other nodes (cluster/hand-over.ts). */
  readonly #cluster: ClusterHandOver;
  /** Sessions whose handshake runs (their count is what maxHandshakes bounds), by source address. */
  readonly #handshaking = new HandshakeSlots<DtlsSession>((s) => s.remoteAddress);
  /** One host for every session (a session passes itself): an idle session holds no closures of its own. */
  readonly #host: SessionHost = {
    send: (s, d) => (s.relay ? s.relay(d, s.remoteAddress, s.remotePort) : this.#send(d, s.remotePort, s.remoteAddress)),
    allocateCid: () => {
      let cid: Buffer;
      do cid = this.#cluster.router ? this.#cluster.router.newCid() : randomBytes(SERVER_CID_LENGTH);
      while (this.#table.byCid(cid));
      return cid;
    },
    migrate: (s, to) => {
      // A move counts against the new address's cap like a new association (else forged source addresses would
      // stack sessions there), and never ends the session that holds the new address:port: the mover is then
      // reached by its CID alone, and the other keeps its address:port.
      if (to.address !== s.remoteAddress && this.#limits.sessions(to.address) >= this.#maxSessionsPerAddress) return false;
      this.#table.moved(s, to);
      this.#limits.removed(s.remoteAddress);
      this.#limits.added(to.address);
      return true;
    },
    established: (s, keys) => {
      this.#handshaking.delete(s);
      // the client proved itself with a complete handshake: the earlier session of its address:port goes
      this.#table.established(s)?.close();
      this.#kept.established(s, keys);
      this.emit('session', s);
    },
    leaseRunningOut: (s) => this.#kept.renew(s),
    handshakeFailed: (s, err) => {
      const info: HandshakeErrorInfo = { remoteAddress: s.remoteAddress, remotePort: s.remotePort };
      if (s.pskIdentity !== undefined) info.pskIdentity = s.pskIdentity;
      if (s.offeredCertificateSubject !== undefined) info.certificateSubject = s.offeredCertificateSubject;
      this.emit('handshakeError', err, info);
    },
    closed: (s) => {
      const wasHandshake = this.#handshaking.delete(s);
      if (!this.#live.delete(s)) return; // refused before it was counted
      this.#kept.closed(s, wasHandshake);
      this.#limits.removed(s.remoteAddress);
      this.#table.closed(s);
    },
  };
  #closed = false;

  constructor(opts: DtlsServerOptions) {
    super();
    const limits: DtlsLimits = {
      maxSessions: opts.maxSessions ?? DEFAULTS.maxSessions,
      maxHandshakes: opts.maxHandshakes ?? DEFAULTS.maxHandshakes,
      maxSessionsPerAddress: opts.maxSessionsPerAddress ?? DEFAULTS.maxSessionsPerAddress,
      handshakeRatePerAddress: opts.handshakeRatePerAddress ?? DEFAULTS.handshakeRatePerAddress,
      handshakeBurstPerAddress: opts.handshakeBurstPerAddress ?? DEFAULTS.handshakeBurstPerAddress,
      handshakeTimeoutMs: opts.handshakeTimeoutMs ?? DEFAULTS.handshakeTimeoutMs,
      idleTimeoutMs: opts.idleTimeoutMs ?? DEFAULTS.idleTimeoutMs,
      mtu: opts.mtu ?? DEFAULTS.mtu,
      receiveBufferBytes: opts.receiveBufferBytes ?? DEFAULTS.receiveBufferBytes,
    };
    for (const [name, v] of Object.entries(limits)) {
      if (!(Number.isFinite(v) && v >= 0)) throw new Error(`${name} must be a non-negative number`);
    }
    this.limits = Object.freeze(limits);
    const mtu = limits.mtu;
    if (mtu < 64) throw new Error('mtu must be at least 64 bytes');
    const certificate = opts.certificate ? serverCertificate(opts.certificate) : undefined;
    const attachment = opts.attachment ?? (() => undefined);
    this.#kept = new KeptSessions(opts.keeper, {
      closed: () => this.#closed,
      maxLookups: limits.maxHandshakes,
      carryOn: (kept) => this.#carryOn(kept),
      redeliver: (datagram, rinfo) => this.#onMessage(datagram, rinfo),
      attachment,
      emit: (event, err) => this.emit(event, err),
    });
    this.#cluster = new ClusterHandOver({
      closed: () => this.#closed,
      kept: this.#kept,
      attachment,
      handle: (s, datagram, from) => s.handleRecords(parseDatagram(datagram, SERVER_CID_LENGTH), from),
      emit: (event, err) => this.emit(event, err),
    });
    this.#config = {
      lookupPsk: opts.lookupPsk,
      suites: certificate ? [...CIPHER_SUITES, ...ECDHE_ECDSA_SUITES] : CIPHER_SUITES,
      cache: new SessionCache(
        opts.sessionCacheSize ?? (opts.sharedCache ? DEFAULTS.sharedCacheFront : DEFAULTS.sessionCacheSize),
        opts.sessionLifetimeMs ?? DEFAULTS.sessionLifetimeMs,
        opts.sharedCache,
      ),
      // A certificate session resumes only while its chain is still valid and trusted (anchors may have changed).
      ...(certificate ? { certificate } : {}),
      resumable: (s) => s.peerCertificates.length === 0 || (certificate !== undefined && chainStillValid(s.peerCertificates, certificate.trustAnchors())),
      mtu,
      handshakeTimeoutMs: limits.handshakeTimeoutMs,
      idleTimeoutMs: limits.idleTimeoutMs,
      initialRetransmitMs: DEFAULTS.initialRetransmitMs,
      maxRetransmitMs: DEFAULTS.maxRetransmitMs,
    };
    this.#maxSessions = limits.maxSessions;
    this.#maxHandshakes = limits.maxHandshakes;
    this.#limits = new AddressLimits(limits);
    this.#maxSessionsPerAddress = limits.maxSessionsPerAddress;
    this.#rotation = setInterval(() => this.#cookies.rotate(), opts.cookieRotationMs ?? DEFAULTS.cookieRotationMs);
    this.#rotation.unref();
    const idleMs = this.#config.idleTimeoutMs;
    this.#idleSweep = setInterval(
      () => {
        const before = Date.now() - idleMs;
        for (const s of this.#live) s.closeIfIdleSince(before); // closing deletes; Set iteration allows it
      },
      Math.max(100, Math.min(idleMs / 4, 10_000)),
    );
    this.#idleSweep.unref();
    if (opts.socket instanceof dgram.Socket) {
      this.socket = opts.socket;
    } else {
      this.socket = dgram.createSocket('udp4');
      this.socket.once('listening', () => {
        try {
          this.socket.setRecvBufferSize(limits.receiveBufferBytes);
        } catch {
          // a kernel that refuses the size (rather than capping it, as Linux does) keeps its default
        }
      });
      this.socket.bind(opts.socket ?? 0, opts.host ?? '0.0.0.0');
    }
    this.socket.on('message', this.#onMessage);
    this.socket.on('listening', () => this.emit('listening'));
    this.socket.on('error', (err) => this.emit('error', err));
  }

  address(): AddressInfo {
    return this.socket.address();
  }

  /** Handshakes in progress. */
  get handshakeCount(): number {
    return this.#handshaking.size;
  }

  /** Established sessions. */
  get sessionCount(): number {
    return this.#live.size - this.#handshaking.size;
  }

  /** Handshakes in progress + sessions held by one source IP address. */
  sessionsFrom(address: string): number {
    return this.#limits.sessions(address);
  }

  /** From now on, CIDs name this node and records of CIDs held elsewhere go to `router` (a cluster node). */
  routeCids(router: CidRouter): void {
    this.#cluster.router = router;
  }

  /**
   * A datagram another cluster node received from the device at `from` (tls12_cid records only): handled as if it had
   * come to this server's socket from there, and once authentic, answers go back through `relay`. False when no
   * session here holds its CID.
   */
  receiveRelayed(datagram: Buffer, from: PeerRoute & { relay: Relay }): boolean {
    let records: DtlsRecord[];
    try {
      records = parseDatagram(datagram, SERVER_CID_LENGTH);
    } catch {
      return true; // malformed: nothing anyone else could do with it either
    }
    if (records.length === 0 || records[0].type !== CONTENT_TYPE_TLS12_CID) return true;
    const session = this.#table.byCid(records[0].cid!);
    if (!session) return false;
    if (!this.#cluster.held(session, datagram, from)) session.handleRecords(records, from);
    return true;
  }

  /**
   * Hands an established Connection ID session over to another node of the cluster: writes its exact state (with the
   * application's attachment) to the keeper, then `announce()` (the cluster notes where the session goes), then lets it
   * go here without a word to the peer; the next record reaches the new node, which carries the session on from
   * that state. Records that arrive meanwhile wait and then follow the session (through the CidRouter). When
   * either write fails, the session stays here and the waiting records are handled by it. Resolves true when the
   * session was handed over. The caller hands over only between exchanges (nothing left to answer on this node).
   */
  handOver(s: DtlsSession, announce: () => Promise<unknown>): Promise<boolean> {
    return this.#cluster.handOver(s, announce);
  }

  /**
   * A record a cluster node could not place (its CID names a node that is gone, or this node, which does not hold it):
   * held while the session is looked for among the kept ones, then handled as if it had come from `from`. False when
   * there is nothing to look in (no keeper, or the ref was missed a moment ago).
   */
  claimKept(cid: Buffer, datagram: Buffer, from: { address: string; port: number }): boolean {
    return this.#kept.holdFor(`c${cid.toString('hex')}`, datagram, {
      address: from.address,
      port: from.port,
      family: from.address.includes(':') ? 'IPv6' : 'IPv4',
      size: datagram.length,
    });
  }

  /** Closes every session (close_notify; after suspend(): without a word), stops all timers and closes the socket. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    clearInterval(this.#rotation);
    clearInterval(this.#idleSweep);
    for (const s of [...this.#live]) {
      if (this.#kept.suspending) s.release();
      else s.close();
    }
    this.socket.off('message', this.#onMessage);
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  /**
   * Hands every established session over to whichever process comes next: writes their latest state to the keeper
   * (with the application's `attachment`) and closes the server without telling the peers.
   * Resolves with the number of sessions written. Without a keeper it is close().
   */
  async suspend(): Promise<number> {
    if (!this.#kept.keeper || this.#closed) {
      await this.close();
      return 0;
    }
    this.#kept.suspending = true;
    this.socket.off('message', this.#onMessage); // no record changes a session while it is written out
    try {
      return await this.#kept.saveEstablished(this.#live);
    } finally {
      await this.close();
    }
  }

  /**
   * The session with this Connection ID (or of this address:port), carried on here from its kept state when this
   * process does not hold it (after a restart, or when the node that held it is gone); null when there is none.
   */
  takeOverSession(ref: Buffer | { address: string; port: number }): Promise<DtlsSession | null> {
    const local = Buffer.isBuffer(ref) ? this.#table.byCid(ref) : this.#table.at(ref.address, ref.port);
    if (local) return Promise.resolve(local);
    const key = Buffer.isBuffer(ref) ? `c${ref.toString('hex')}` : `a${ref.address}:${ref.port}`;
    return this.#kept.takeOver(key);
  }

  /** An established session from its kept state, registered like one made here; null when this server is full or closing. */
  #carryOn(kept: KeptStart): DtlsSession | null {
    if (this.#closed || this.#kept.suspending || this.sessionCount >= this.#maxSessions) return null;
    const peer = { address: kept.motion.remoteAddress, port: kept.motion.remotePort };
    const cid = kept.keys.connectionId?.toString('hex');
    // another process's session, or one made here meanwhile: the one here stays
    if (!this.#table.mayCarryOn(cid, peer.address, peer.port)) return null;
    const session = new DtlsSession(this.#host, this.#config, peer, kept);
    this.#live.add(session);
    this.#limits.added(peer.address);
    this.#table.addCarriedOn(session, cid);
    this.emit('session', session, kept.motion.attachment);
    return session;
  }

  #onMessage = (datagram: Buffer, rinfo: dgram.RemoteInfo): void => {
    try {
      const records = parseDatagram(datagram, SERVER_CID_LENGTH);
      if (records.length === 0) return;
      if (records[0].type === CONTENT_TYPE_TLS12_CID) {
        // RFC 9146: a record with our CID finds its session whatever address it comes from.
        const cid = records[0].cid!;
        const session = this.#table.byCid(cid);
        if (session) {
          const from = { address: rinfo.address, port: rinfo.port };
          if (!this.#cluster.held(session, datagram, from)) session.handleRecords(records, from);
        }
        // a cluster node: another live node's CID is forwarded there; a gone node's (or this node's, after a restart) is claimed from the kept sessions
        else if (this.#cluster.router) this.#cluster.router.unclaimed(cid, datagram, { address: rinfo.address, port: rinfo.port });
        else this.#kept.holdFor(`c${cid.toString('hex')}`, datagram, rinfo);
        return;
      }
      const key = `${rinfo.address}:${rinfo.port}`;
      const session = this.#table.at(rinfo.address, rinfo.port);
      const restart = this.#table.restartAt(rinfo.address, rinfo.port);
      if (restart) {
        // Plaintext belongs to the new handshake; each session drops the protected records of the other unread.
        restart.handleRecords(records);
        const protectedRecords = records.filter((r) => r.epoch !== 0);
        if (session && protectedRecords.length > 0) session.handleRecords(protectedRecords);
        return;
      }
      // A ClientHello in epoch 0 to an established session means the client restarted (RFC 6347 §4.2.8):
      // it goes through the cookie check like any new client; everything else belongs to the session.
      if (session && !(session.established && isClientHello(records[0]))) {
        session.handleRecords(records);
        return;
      }
      // protected records from an address:port without a session: perhaps a session another process kept
      if (!session && records[0].epoch !== 0 && this.#kept.holdFor(`a${key}`, datagram, rinfo)) return;
      this.#onClientHello(records[0], datagram, rinfo, session);
    } catch {
      // A malformed datagram from a peer without a session: drop it.
    }
  };

  #onClientHello(r: DtlsRecord, datagram: Buffer, rinfo: dgram.RemoteInfo, old: DtlsSession | undefined): void {
    if (!isClientHello(r)) return;
    const [f] = parseHandshakeFragments(r.fragment);
    if (f.fragmentOffset !== 0 || f.body.length !== f.length) return;
    const ch = parseClientHello(f.body, { dtls: true });
    if (!this.#cookies.verify(rinfo.address, rinfo.port, ch)) {
      const hvr = helloVerifyRequestDatagram(this.#cookies.make(rinfo.address, rinfo.port, ch), r.seq, f.messageSeq);
      if (hvr.length <= datagram.length) this.#send(hvr, rinfo.port, rinfo.address);
      return;
    }
    if (this.#kept.fetchingResumption(this.#config.cache, ch.sessionId, datagram, rinfo)) return;
    if (this.sessionCount >= this.#maxSessions) return;
    // every slot taken: the oldest handshake of the address holding the most gives way, if it holds more than this one
    const full = this.#handshaking.size >= this.#maxHandshakes;
    const evict = full ? this.#handshaking.victimFor(rinfo.address) : undefined;
    if (full && !evict) return;
    if (!this.#limits.admit(rinfo.address)) return;
    if (this.#handshaking.size >= this.#maxHandshakes) evict?.close();
    const peer = { address: rinfo.address, port: rinfo.port };
    let session: DtlsSession;
    try {
      session = new DtlsSession(this.#host, this.#config, peer, {
        ch,
        msg: { type: f.type, messageSeq: f.messageSeq, body: f.body },
        recordSeq: r.seq,
      });
    } catch (err) {
      const description = err instanceof TlsAlert ? err.description : AlertDescription.internal_error;
      const alert = encodeRecord({ type: ContentType.alert, version: DTLS10, epoch: 0, seq: r.seq, fragment: Buffer.from([AlertLevel.fatal, description]) });
      this.#send(alert, rinfo.port, rinfo.address);
      this.emit('handshakeError', err, { remoteAddress: rinfo.address, remotePort: rinfo.port });
      return;
    }
    if (session.closed) return;
    this.#live.add(session);
    this.#handshaking.add(session);
    this.#table.addHandshake(session, old);
    this.#limits.added(peer.address);
  }

  #send(datagram: Buffer, port: number, address: string): void {
    try {
      this.socket.send(datagram, port, address, (err) => {
        if (err && !this.#closed) this.emit('error', err);
      });
    } catch (err) {
      if (!this.#closed) this.emit('error', err);
    }
  }
}

/** Normalises and checks the certificate option: P-256 key matching the first certificate of the chain. */
function serverCertificate(o: NonNullable<DtlsServerOptions['certificate']>): ServerCertificate {
  const key = o.key instanceof KeyObject ? o.key : createPrivateKey(o.key);
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new Error('certificate.key must be an EC P-256 (prime256v1) private key');
  }
  const items = typeof o.chain === 'string' ? (o.chain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []) : o.chain;
  const chain = items.map((c) => (c instanceof X509Certificate ? c : new X509Certificate(c)));
  if (chain.length === 0) throw new Error('certificate.chain is empty');
  if (!chain[0].checkPrivateKey(key)) throw new Error('certificate.key does not match the first certificate of certificate.chain');
  if (typeof o.trustAnchors !== 'function') throw new Error('certificate.trustAnchors must be a function returning X509Certificate[]');
  return { key, chainDer: chain.map((c) => c.raw), trustAnchors: o.trustAnchors };
}

function isClientHello(r: DtlsRecord): boolean {
  return r.type === ContentType.handshake && r.epoch === 0 && r.fragment.length > 0 && r.fragment[0] === HandshakeType.client_hello;
}

export function createDtlsServer(opts: DtlsServerOptions): DtlsServer {
  return new DtlsServer(opts);
}
