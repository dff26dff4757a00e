/**
 * One DTLS association with a peer address:port, from the ClientHello with a valid cookie to close. The handshake
 * state machine is all in `#onHandshakeMessage`:
 *
 *   (ClientHello with cookie, full handshake, PSK suite: send flight 4)    wait_client_key_exchange
 *   wait_client_key_exchange ──ClientKeyExchange──▶ psk_lookup        (records queued, async lookupPsk)
 *   psk_lookup ──PSK found, keys derived──▶ wait_finished                (epoch 1 readable)
 *   (… ECDHE_ECDSA suite: flight 4 adds Certificate, ServerKeyExchange, CertificateRequest)   wait_client_certificate
 *   wait_client_certificate ──Certificate, chain verified──▶ wait_client_key_exchange
 *   wait_client_key_exchange ──ClientKeyExchange, ECDH, keys derived──▶ wait_certificate_verify
 *   wait_certificate_verify ──signature ok──▶ wait_finished
 *   wait_finished ──Finished ok──▶ (send flight 6) established           (emit 'session'; session id cached)
 *   (ClientHello resuming a cached PSK session id)  resume_lookup ──same PSK──▶ (flight 4b) | ──else──▶ (flight 4)
 *   (ClientHello resuming a cached session id: send flight 4b = ServerHello, CCS, Finished)   wait_finished
 *   wait_finished ──Finished ok──▶ established                           (abbreviated handshake, nothing sent)
 *   established: application data both ways; a retransmitted client flight 5 gets flight 6 again;
 *                new handshake messages in epoch 1 → warning no_renegotiation (nothing is reassembled any more);
 *                close_notify → close; only authentic (epoch 1) records count as activity against the idle timeout;
 *                an authentic, newest tls12_cid record from another address moves the session (RFC 9146 §6),
 *                unless the server refuses the move.
 *   Records that fail authentication are dropped silently in every state (RFC 6347 §4.1.2.7); a resumption ends
 *   only by an authenticated alert.
 *
 * Flight sending follows pion/dtls: the last flight is kept, retransmitted on a timer that doubles from 1 s to
 * 60 s, and re-sent at once when the peer retransmits its previous flight.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { X509Certificate } from 'node:crypto';
import { AlertDescription, AlertLevel, TlsAlert, TlsPeerAlert } from '../tls/alert.ts';
import { lookupPskSafely } from '../tls/psk.ts';
import { HandshakeType, expectType, findExtension } from '../tls/messages.ts';
import type { ClientHello } from '../tls/messages.ts';
import { HmacSha256Key, extendedMasterSecret, keyExpansion, masterSecret, pskPreMasterSecret } from '../tls/prf.ts';
import { keyBlockLength } from '../tls/suites/index.ts';
import type { CipherSuite } from '../tls/suites/index.ts';
import { flight4, negotiate, serverHello } from './flights/flight4.ts';
import { certificateKeyExchange } from './flights/flight4-certificate.ts';
import type { ServerCertificate } from './flights/flight4-certificate.ts';
import { isEcdheEcdsa } from '../tls/ecdhe-ecdsa.ts';
import type { Negotiated } from './flights/flight4.ts';
import { checkCertificateVerify, clientCertificates } from './flights/flight5-certificate.ts';
import { checkClientFinished } from './flights/flight5-finished.ts';
import { clientPskIdentity, pskOrStandIn } from './flights/flight5-psk.ts';
import { flight6Finished } from './flights/flight6.ts';
import { HANDSHAKE_HEADER_LENGTH, HandshakeReassembler, fragmentMessage, parseHandshakeFragments, transcriptBytes } from './handshake.ts';
import type { HandshakeMessage } from './handshake.ts';
import { ContentType, MAX_SEQUENCE, RECORD_HEADER_LENGTH, RecordLayer } from './record.ts';
import { ReplayWindow } from './replay.ts';
import { SessionEvents } from './session-events.ts';
import { HandshakeState } from './handshake-state.ts';
import type { DtlsRecord } from './record.ts';
import { EXTENSION_CONNECTION_ID, encodeConnectionIdExtension, parseConnectionIdExtension, suiteSupportsCid } from './cid.ts';
import type { CachedSession, SessionCache } from './session-cache.ts';
import { WRITE_LEASE, certificatesFromDer, epoch1Protections } from './session-state.ts';
import type { SessionKeys, SessionMotion } from './session-state.ts';

export interface SessionConfig {
  lookupPsk(identity: string): Promise<Buffer | null>;
  /** Present when the ECDHE_ECDSA suites are offered. */
  certificate?: ServerCertificate;
  suites: readonly CipherSuite[];
  cache: SessionCache;
  /** Whether a cached session may be resumed now (PSK sessions: always; certificate sessions: chain still trusted). */
  resumable(s: CachedSession): boolean;
  mtu: number;
  handshakeTimeoutMs: number;
  idleTimeoutMs: number;
  initialRetransmitMs: number;
  maxRetransmitMs: number;
}

/**
 * A way to the peer other than the server's own socket: the datagram goes back through the cluster node the peer's
 * records arrive at (src/dtls/cluster/), which sends it to `address`:`port` from the socket they came in on.
 */
export type Relay = (datagram: Buffer, address: string, port: number) => void;

/** Where a datagram came from, and the relay it came through when another cluster node received it. */
export interface PeerRoute {
  address: string;
  port: number;
  relay?: Relay;
}

/** What a session needs from its server; one host serves every session, so each call names the session. */
export interface SessionHost {
  /** Sends to the session's current remoteAddress/remotePort (through its relay when it has one). */
  send(session: DtlsSession, datagram: Buffer): void;
  /** The handshake completed; `keys` is what a later process needs to carry the session on (session-state.ts). */
  established(session: DtlsSession, keys: SessionKeys): void;
  handshakeFailed(session: DtlsSession, err: Error): void;
  closed(session: DtlsSession): void;
  /** A connection id no other session of this server uses (SERVER_CID_LENGTH bytes). */
  allocateCid(): Buffer;
  /** Half of the session's lease of sequence numbers is used (see limitWrites): the host renews it. */
  leaseRunningOut?(session: DtlsSession): void;
  /**
   * The session is about to move to `to` (RFC 9146 §6; its remoteAddress/remotePort still say where it was): false
   * when it may not, and it then stays where it is.
   */
  migrate(session: DtlsSession, to: { address: string; port: number }): boolean;
}

/** A kept session to carry on: its state, and the first sequence number this load may seal (session-store.ts). */
export interface KeptStart {
  keys: SessionKeys;
  motion: SessionMotion;
  writeSeq: number;
  /** The end of its lease: it seals below this until the lease is renewed. */
  writeLimit: number;
}

type State =
  | 'wait_client_certificate'
  | 'wait_client_key_exchange'
  | 'wait_certificate_verify'
  | 'psk_lookup'
  | 'resume_lookup'
  | 'wait_finished'
  | 'established'
  | 'closed';

/** One flight: `plain` handshake messages in epoch 0, then, when `encrypted` is not empty, a CCS and those in epoch 1. */
interface Flight {
  plain: HandshakeMessage[];
  encrypted: HandshakeMessage[];
}

const MAX_QUEUED_RECORDS = 32;
const EMPTY = Buffer.alloc(0);
const NO_DATA: Buffer[] = [];
/** A copy in its own (unpooled) memory. */
const owned = (b: Buffer): Buffer => {
  const copy = Buffer.alloc(b.length);
  b.copy(copy);
  return copy;
};
const ownedMessage = (m: HandshakeMessage): HandshakeMessage => ({ ...m, body: owned(m.body) });
const CCS = Buffer.from([1]);
/**
 * A session's last activity is kept in ms since this module loaded: a small integer for the first 24 days of the
 * process (Date.now() itself would take a heap number of 16 bytes in every idle session), a heap number after that.
 */
const CLOCK_BASE = Date.now();
const NO_CERTIFICATES: X509Certificate[] = [];
const NO_EXTENSIONS: Negotiated['extraExtensions'] = [];
/**
 * What `resumed` holds once the handshake is over, where only its presence counts: the cached session itself (its
 * master secret) stays in the cache, not in every resumed idle session.
 */
const RESUMED: CachedSession = Object.freeze({ masterSecret: EMPTY, suiteId: 0, extendedMasterSecret: false, peerCertificates: [], expiresAt: 0 });
type SettledFields = Pick<Negotiated, 'suite' | 'extendedMasterSecret' | 'secureRenegotiation' | 'clientSentPointFormats' | 'ecdheGroup'>;
const SETTLED = new Map<string, Negotiated>();

/**
 * An established session's negotiation: what it still reads of it (the suite, the flags) with the per-handshake
 * buffers emptied. Few combinations exist, so every session with the same one shares one frozen object.
 */
function settled(f: SettledFields, resumed: boolean): Negotiated {
  const name = `${f.suite.id}:${+f.extendedMasterSecret}:${+f.secureRenegotiation}:${+f.clientSentPointFormats}:${f.ecdheGroup ?? ''}:${+resumed}`;
  let n = SETTLED.get(name);
  if (!n) {
    n = Object.freeze({
      ...f,
      clientRandom: EMPTY,
      serverRandom: EMPTY,
      sessionId: EMPTY,
      extraExtensions: NO_EXTENSIONS,
      ...(resumed ? { resumed: RESUMED } : {}),
    });
    SETTLED.set(name, n);
  }
  return n;
}

/**
 * Emits 'data' (Buffer), 'close', and 'migrate' ({ address, port } it came from) when an authentic tls12_cid record
 * moved it to a new address/port. Created by the server; handed out through its 'session' event.
 */
export class DtlsSession extends SessionEvents {
  /** Where the peer is now; changes only through Connection ID migration (see 'migrate'). */
  remoteAddress: string;
  remotePort: number;
  /** How answers reach the peer: the server's socket (undefined), or the relay its newest authentic record came through. */
  relay: Relay | undefined = undefined;
  /**
   * Authentic records in a row that came through the current relay (0 when the newest came straight to this server):
   * a session whose device now reaches another node keeps counting up, and is handed over to that node (cluster/).
   */
  relayStreak = 0;
  /** The CID this server issued for the session (the client puts it in its records), if one was negotiated. */
  readonly connectionId: Buffer | undefined;
  /** The CID the client asked the server to put in its records (may be empty), if one was negotiated. */
  readonly peerConnectionId: Buffer | undefined;
  pskIdentity: string | undefined;
  /** The client's verified certificate chain, device certificate first (empty for PSK sessions: one shared empty array). */
  peerCertificates: X509Certificate[] = NO_CERTIFICATES;
  /** Subject of the device certificate the client sent, verified or not (for refusal reports). */
  offeredCertificateSubject: string | undefined;

  readonly #host: SessionHost;
  readonly #config: SessionConfig;
  readonly #records = new RecordLayer();
  /** Until established: what only the handshake needs (see HandshakeState); undefined once established or carried on. */
  #hs: HandshakeState | undefined;
  #negotiated: Negotiated;
  #state: State = 'wait_client_key_exchange';
  #nextSendSeq: number;
  /** message_seq of the first message of the client flight we wait for (or would wait for after the last). */
  #awaitedFlightStart: number;
  #flight: Flight | undefined;
  /** Established: the session id as a latin1 string (an idle session holds 32 characters rather than a Buffer). */
  #sessionIdText: string | undefined;
  /** Established by a full handshake: flight 6's Finished verify_data (latin1), until the client's data shows it arrived. */
  #finished6: string | undefined;
  /** Application data waiting for a renewed lease of sequence numbers (a kept session: session-store.ts); made when needed. */
  #awaitingLease: Buffer[] | undefined;
  /** Carried on from a kept state (session-store.ts) rather than made by a handshake in this process. */
  #restored = false;
  /** When the last authentic record arrived (ms since CLOCK_BASE); the server's idle sweep closes sessions quiet for too long. */
  #lastActive = 0;

  /**
   * Starts the handshake from a ClientHello whose cookie the server verified: negotiates and sends flight 4.
   * Throws TlsAlert when nothing acceptable was offered (the server then answers with a plaintext alert).
   * Or, given a kept state (session-state.ts) instead, carries an established session on: nothing is sent.
   */
  constructor(
    host: SessionHost,
    config: SessionConfig,
    peer: { address: string; port: number },
    start: { ch: ClientHello; msg: HandshakeMessage; recordSeq: number } | KeptStart,
  ) {
    super();
    this.#host = host;
    this.#config = config;
    this.remoteAddress = peer.address;
    this.remotePort = peer.port;
    if ('keys' in start) {
      const { keys, motion, writeSeq, writeLimit } = start;
      const suite = config.suites.find((x) => x.id === keys.suiteId);
      if (!suite) throw new Error(`kept session has suite 0x${keys.suiteId.toString(16)}, which this server does not offer`);
      this.connectionId = keys.connectionId;
      this.peerConnectionId = keys.peerConnectionId;
      this.pskIdentity = keys.pskIdentity;
      if (keys.peerCertificates.length > 0) this.peerCertificates = certificatesFromDer(keys.peerCertificates);
      this.#negotiated = settled({ suite, extendedMasterSecret: keys.extendedMasterSecret, secureRenegotiation: true, clientSentPointFormats: false }, false);
      this.#sessionIdText = keys.sessionId.toString('latin1');
      const p = epoch1Protections(suite, keys.keyBlock, keys.connectionId, keys.peerConnectionId);
      this.#records.installReadEpoch(1, p.read, p.readCid, ReplayWindow.restore(motion.replay));
      this.#records.installWriteEpoch(1, p.write, p.writeCid, writeSeq);
      this.#records.setWriteLimit(writeLimit);
      this.#awaitedFlightStart = 0;
      this.#nextSendSeq = 0;
      this.#state = 'established';
      this.#records.endEpoch0();
      this.#restored = true;
      this.#lastActive = motion.lastActive - CLOCK_BASE;
      return;
    }
    const { ch, msg, recordSeq } = start;
    const n = negotiate(ch, { suites: config.suites, cache: config.cache, stillValid: config.resumable });
    this.#negotiated = n;
    // RFC 9146 §3: the client's extension holds the CID it wants to receive; ours holds the one we want to receive.
    const offered = findExtension(ch.extensions, EXTENSION_CONNECTION_ID);
    if (offered && suiteSupportsCid(n.suite.id)) {
      this.peerConnectionId = Buffer.from(parseConnectionIdExtension(offered.data));
      this.connectionId = host.allocateCid();
      n.extraExtensions.push({ type: EXTENSION_CONNECTION_ID, data: encodeConnectionIdExtension(this.connectionId) });
    }
    this.#hs = new HandshakeState(config.initialRetransmitMs);
    this.#hs.reassembler = new HandshakeReassembler(msg.messageSeq + 1);
    this.#awaitedFlightStart = msg.messageSeq + 1;
    this.#records.setInitialWriteSequence(recordSeq);
    this.#handshake.signedMessages = []; // until #startFull knows whether a CertificateVerify will need them
    this.#addToTranscript(msg);
    this.#nextSendSeq = msg.messageSeq; // the server's message_seq continues from the ClientHello's (RFC 6347 §4.2.2)
    this.#handshake.handshakeTimer = setTimeout(() => this.#fail(new Error('DTLS handshake timeout'), undefined), config.handshakeTimeoutMs);
    if (n.resumed?.pskHash) this.#confirmResumption(n.resumed, n.resumed.pskHash);
    else if (n.resumed) this.#startAbbreviated(n.resumed);
    else this.#startFull();
  }

  /** The handshake's state: only the handshake's own steps use it (a bug otherwise, not anything a peer can cause). */
  get #handshake(): HandshakeState {
    if (!this.#hs) throw new Error('DTLS handshake state used after the handshake');
    return this.#hs;
  }

  /**
   * A PSK session resumes only while its identity still has the same key (a deleted device or a changed key must
   * not live on in the cache): the lookup runs first, records wait, and a mismatch turns into a full handshake.
   */
  #confirmResumption(cached: CachedSession, pskHash: Buffer): void {
    this.#state = 'resume_lookup';
    lookupPskSafely(this.#config.lookupPsk, cached.pskIdentity ?? '').then(
      (psk) => {
        if (this.#state !== 'resume_lookup') return; // failed or closed meanwhile
        const n = this.#negotiated;
        if (psk && Buffer.isBuffer(psk) && timingSafeEqual(pskFingerprint(psk), pskHash)) {
          this.#startAbbreviated(cached);
        } else {
          this.#config.cache.delete(n.sessionId);
          delete n.resumed;
          n.sessionId = this.#config.cache.newId();
          this.#state = 'wait_client_key_exchange';
          this.#startFull();
        }
        const queued = this.#handshake.queued;
        this.#handshake.queued = [];
        this.handleRecords(queued);
      },
      (err: unknown) => this.#fail(err, AlertDescription.internal_error),
    );
  }

  #startFull(): void {
    const n = this.#negotiated;
    let keyExchange: Array<{ type: number; body: Buffer }> = [];
    if (isEcdheEcdsa(n.suite.id)) {
      const kx = certificateKeyExchange(n, this.#config.certificate!);
      this.#handshake.ephemeral = kx.ephemeral;
      keyExchange = kx.messages;
      this.#state = 'wait_client_certificate';
    } else {
      this.#handshake.signedMessages = undefined;
    }
    const messages = flight4(n, this.#nextSendSeq, keyExchange);
    for (const m of messages) this.#addToTranscript(m);
    this.#nextSendSeq += messages.length;
    this.#sendFlight({ plain: messages, encrypted: [] });
  }

  /** Hashes a handshake message into the transcript (and keeps it while a CertificateVerify may need it). */
  #addToTranscript(msg: HandshakeMessage): void {
    const bytes = transcriptBytes(msg);
    this.#handshake.transcript.update(bytes);
    this.#handshake.signedMessages?.push(bytes);
  }

  /** Flight 4b (RFC 5246 §7.3 abbreviated handshake): ServerHello with the client's session id, CCS, Finished. */
  #startAbbreviated(cached: CachedSession): void {
    this.#handshake.signedMessages = undefined;
    this.pskIdentity = cached.pskIdentity;
    this.peerCertificates = cached.peerCertificates;
    const sh = serverHello(this.#negotiated, this.#nextSendSeq++);
    this.#addToTranscript(sh);
    this.#installKeys(cached.masterSecret);
    this.#records.installWriteEpoch(1, this.#handshake.serverWrite, this.#handshake.serverWriteCid);
    const finished = flight6Finished(this.#handshake.master!, this.#handshake.transcript.copy().digest(), this.#nextSendSeq++);
    this.#addToTranscript(finished);
    this.#state = 'wait_finished';
    this.#sendFlight({ plain: [sh], encrypted: [finished] });
  }

  /** Whether this session was carried on from a kept state (another process made it). */
  get restored(): boolean {
    return this.#restored;
  }

  /** The epoch-1 sequence number the session may not reach (see limitWrites). */
  get writeLimit(): number {
    return this.#records.writeLimit;
  }

  /** Epoch-1 records are sealed up to (not including) sequence number `limit` (a lease of session-store.ts). */
  limitWrites(limit: number): void {
    this.#records.setWriteLimit(limit);
    const held = this.#awaitingLease;
    this.#awaitingLease = undefined;
    for (const data of held ?? NO_DATA) {
      if (this.#state !== 'established') return;
      this.send(data);
    }
  }

  /** What moves with every record, for session-state.ts (`attachment`: the application's bytes). */
  motion(attachment: Buffer = EMPTY): SessionMotion {
    const { writeSeq, replay } = this.#records.epoch1State();
    return { writeSeq, replay, remoteAddress: this.remoteAddress, remotePort: this.remotePort, lastActive: this.#lastActive + CLOCK_BASE, attachment };
  }

  /** Whether this session was resumed from the cache by an abbreviated handshake. */
  get resumed(): boolean {
    return this.#negotiated.resumed !== undefined;
  }

  /** The session id (resumption handle) of this session. */
  get sessionId(): Buffer {
    return this.#sessionIdText === undefined ? this.#negotiated.sessionId : Buffer.from(this.#sessionIdText, 'latin1');
  }

  /** The ECDHE group of a full certificate handshake ('x25519' or 'secp256r1'), undefined otherwise. */
  get ecdheGroup(): 'x25519' | 'secp256r1' | undefined {
    const g = this.#negotiated.ecdheGroup ?? this.#hs?.ephemeral?.group;
    return g === undefined ? undefined : g === 29 ? 'x25519' : 'secp256r1';
  }

  /** IANA name of the negotiated suite. */
  get cipherSuite(): string {
    return this.#negotiated.suite.name;
  }
  get extendedMasterSecret(): boolean {
    return this.#negotiated.extendedMasterSecret;
  }
  /** Closes an established session that has had no authentic record since `before` (ms); true when it did. */
  closeIfIdleSince(before: number): boolean {
    if (this.#state !== 'established' || this.#lastActive >= before - CLOCK_BASE) return false;
    this.close();
    return true;
  }

  get closed(): boolean {
    return this.#state === 'closed';
  }
  get established(): boolean {
    return this.#state === 'established';
  }

  /** Sends application data (split into records of at most what fits one datagram). */
  send(data: Buffer): void {
    if (this.#state !== 'established') throw new Error('DTLS session is not established');
    // answers wait behind ones already waiting for a lease, in order
    if (this.#awaitingLease !== undefined) {
      this.#holdForLease(data);
      return;
    }
    const max = Math.max(1, this.#config.mtu - RECORD_HEADER_LENGTH - this.#negotiated.suite.maxOverhead - this.#records.cidOverhead(1));
    let o = 0;
    do {
      if (this.#records.writeRoom() <= 0 && this.#records.writeLimit <= MAX_SEQUENCE) {
        // the lease of a kept session is used up and its renewal not back yet: the rest waits for it (limitWrites)
        this.#host.leaseRunningOut?.(this);
        this.#holdForLease(data.subarray(o));
        return;
      }
      let record: Buffer;
      try {
        record = this.#records.seal(1, ContentType.application_data, data.subarray(o, o + max));
      } catch {
        // sequence numbers used up: the device does a new handshake
        this.#end();
        return;
      }
      this.#host.send(this, record);
      if (this.#records.writeRoom() <= WRITE_LEASE / 2) this.#host.leaseRunningOut?.(this);
      o += max;
    } while (o < data.length);
  }

  /** Application data held while a lease renewal is in flight; more than a lease's worth ends the session (the store is not keeping up). */
  #holdForLease(data: Buffer): void {
    const held = (this.#awaitingLease ??= []);
    held.push(Buffer.from(data));
    if (held.length > WRITE_LEASE) this.#end();
  }

  /** Forgets the session without a word to the peer: it is carried on elsewhere (DtlsServer.suspend). */
  release(): void {
    if (this.#state !== 'closed') this.#end();
  }

  /** Sends close_notify and forgets the session. */
  close(): void {
    if (this.#state === 'closed') return;
    if (this.#state === 'established') this.#sendAlert(AlertLevel.warning, AlertDescription.close_notify);
    this.#end();
  }

  // ---- records in --------------------------------------------------------------------------------------------

  /**
   * Handles the records of one datagram from the peer (called by the server). Never throws. `from` is where the
   * datagram came from when it was routed here by its connection id rather than by address.
   */
  handleRecords(records: DtlsRecord[], from?: PeerRoute): void {
    let retransmit = false;
    for (const r of records) {
      if (this.#state === 'closed') return;
      if (this.#state === 'psk_lookup' || this.#state === 'resume_lookup') {
        if (this.#handshake.queued.length < MAX_QUEUED_RECORDS) this.#handshake.queued.push(r);
        continue;
      }
      try {
        if (this.#onRecord(r, from)) retransmit = true;
      } catch (err) {
        if (this.#state === 'established') continue; // garbage inside an authentic session record: ignore it
        this.#fail(err, err instanceof TlsAlert ? err.description : AlertDescription.internal_error);
        return;
      }
    }
    // Once per datagram at most, so a flood of duplicates cannot make us send more than we receive.
    if (!retransmit) return;
    const flight = this.#flight ?? this.#flight6();
    if (!flight) return;
    this.#sendFlight(flight, false);
    if (this.#finished6 !== undefined) this.#flight = undefined; // an idle session keeps the 12 bytes, not the flight
  }

  /** Flight 6 again from its verify_data (a client that repeats flight 5 did not get it). */
  #flight6(): Flight | undefined {
    if (this.#finished6 === undefined) return undefined;
    return { plain: [], encrypted: [{ type: HandshakeType.finished, messageSeq: this.#nextSendSeq - 1, body: Buffer.from(this.#finished6, 'latin1') }] };
  }

  /**
   * RFC 9146 §6: an authentic tls12_cid record, newer than any before it, from another address/port moves the
   * session there. Only an established session moves (the handshake finishes where it started).
   */
  #maybeMigrate(from: PeerRoute): void {
    if (this.#state !== 'established') return;
    const moved = from.address !== this.remoteAddress || from.port !== this.remotePort;
    if (moved && !this.#host.migrate(this, from)) return;
    // answers go back the way the newest authentic record came: directly, or through the cluster node that relayed it
    this.relayStreak = from.relay === undefined ? 0 : from.relay === this.relay ? this.relayStreak + 1 : 1;
    this.relay = from.relay;
    if (!moved) return;
    const old = { address: this.remoteAddress, port: this.remotePort };
    this.remoteAddress = from.address;
    this.remotePort = from.port;
    this.emit('migrate', old);
  }

  /** Returns true when the record shows the peer retransmitting its previous flight. */
  #onRecord(r: DtlsRecord, from: PeerRoute | undefined): boolean {
    const data = this.#records.open(r);
    if (data === 'bad_mac') {
      // Dropped silently (RFC 6347 §4.1.2.7): anyone who knows the address can send a record that fails. A client
      // with another key fails every time, so when no authentic Finished follows within two of its retransmission
      // periods (one lost or displaced Finished is sent again within one), the verdict is a wrong key, with the
      // alert the client can act on, long before the handshake timeout.
      if (this.#state === 'wait_finished' && !this.#handshake.wrongKeyTimer) {
        this.#handshake.wrongKeyTimer = setTimeout(
          () =>
            this.#fail(
              new TlsAlert(AlertDescription.bad_record_mac, 'client Finished record failed authentication (wrong key?)'),
              AlertDescription.bad_record_mac,
            ),
          2 * this.#config.initialRetransmitMs,
        );
      }
      return false;
    }
    if (data === 'drop') return false;
    // Before the record's content is acted on, so an answer to it already goes to the new address.
    if (from && r.cid !== undefined && this.#records.lastOpenedWasNewest) this.#maybeMigrate(from);
    // Once established, epoch 0 carries only retransmissions of the client's last flight; a plaintext alert or
    // data there could come from anyone who knows the address.
    if (this.#state === 'established' && r.epoch === 0 && r.type !== ContentType.handshake) return false;
    if (r.epoch !== 0) this.#refreshIdle();
    switch (r.type) {
      case ContentType.handshake:
        return this.#state === 'established' ? this.#onEstablishedHandshakeRecord(data, r.epoch) : this.#onHandshakeRecord(data);
      case ContentType.change_cipher_spec:
        if (data.length !== 1 || data[0] !== 1) throw new TlsAlert(AlertDescription.decode_error, 'bad ChangeCipherSpec');
        return false; // epoch 1 keys are installed when derived; the CCS itself carries nothing we need
      case ContentType.alert:
        this.#onAlert(data, r.epoch);
        return false;
      case ContentType.application_data:
        if (this.#state !== 'established' || r.epoch === 0) return false;
        // Data in epoch 1 shows the client has our Finished: flight 6 will not be asked for again (RFC 6347 §4.2.4).
        this.#flight = undefined;
        this.#finished6 = undefined;
        if (data.length > 0) this.emit('data', data);
        return false;
      default:
        return false;
    }
  }

  #onHandshakeRecord(data: Buffer): boolean {
    let retransmit = false;
    for (const f of parseHandshakeFragments(data)) {
      // A message from before the flight we now await means our last flight was lost: send it again.
      if (this.#handshake.reassembler!.push(f) === 'old' && f.messageSeq < this.#awaitedFlightStart) retransmit = true;
    }
    this.#drainHandshake();
    return retransmit;
  }

  /**
   * After the handshake nothing is reassembled: a fragment of the client's last flight (epoch 0 or 1) asks for
   * flight 6 again, and a new message in epoch 1 is a renegotiation, refused at its first fragment. Plaintext
   * fragments of new messages could come from anyone who knows the address: they are ignored.
   */
  #onEstablishedHandshakeRecord(data: Buffer, epoch: number): boolean {
    let retransmit = false;
    for (const f of parseHandshakeFragments(data)) {
      if (f.messageSeq < this.#awaitedFlightStart) retransmit = true;
      else if (epoch !== 0 && f.fragmentOffset === 0) this.#sendAlert(AlertLevel.warning, AlertDescription.no_renegotiation);
    }
    return retransmit;
  }

  /** False while the PSK lookup runs or after the end: handshake messages then wait in the reassembler. */
  #processing(): boolean {
    return this.#state !== 'psk_lookup' && this.#state !== 'resume_lookup' && this.#state !== 'closed';
  }

  #drainHandshake(): void {
    if (!this.#processing()) return;
    // The client Finished ends the loop: the reassembler goes with the handshake.
    for (let msg = this.#hs?.reassembler?.next(); msg; msg = this.#hs?.reassembler?.next()) {
      this.#onHandshakeMessage(msg);
      if (!this.#processing()) break;
    }
  }

  #onAlert(data: Buffer, epoch: number): void {
    if (data.length !== 2) throw new TlsAlert(AlertDescription.decode_error, 'bad alert');
    // A resumption continues a session both sides already hold: only an authenticated alert may end it. (A full
    // handshake has nothing authenticated to protect yet; a plaintext alert ends it, and the client can retry.)
    if (epoch === 0 && this.resumed) return;
    const [level, description] = data;
    if (description === AlertDescription.close_notify) {
      if (this.#state === 'established') {
        this.#sendAlert(AlertLevel.warning, AlertDescription.close_notify);
        this.#end();
      } else {
        this.#fail(new Error('peer sent close_notify during the handshake'), undefined);
      }
    } else if (level === AlertLevel.fatal) {
      // RFC 5246 §7.2.2: a session ended by a fatal alert must not be resumed (an authentic one: in plaintext,
      // anyone could end it for the device).
      if (epoch !== 0) this.#config.cache.delete(this.sessionId);
      if (this.#state === 'established') this.#end();
      else this.#fail(new TlsPeerAlert(description), undefined);
    }
  }

  // ---- handshake state machine ------------------------------------------------------------------------------

  #onHandshakeMessage(msg: HandshakeMessage): void {
    switch (this.#state) {
      case 'wait_client_certificate':
        expectType(msg, HandshakeType.certificate);
        clearTimeout(this.#handshake.retransmitTimer); // flight 5 has begun: flight 4 arrived
        this.peerCertificates = clientCertificates(msg.body, this.#config.certificate!.trustAnchors(), (subject) => {
          this.offeredCertificateSubject = subject;
        });
        this.#addToTranscript(msg);
        this.#state = 'wait_client_key_exchange';
        return;
      case 'wait_client_key_exchange':
        expectType(msg, HandshakeType.client_key_exchange);
        this.#addToTranscript(msg);
        if (this.#handshake.ephemeral) {
          this.#installKeys(this.#deriveMaster(this.#handshake.ephemeral.premasterFromClientKeyExchange(msg.body)));
          this.#state = 'wait_certificate_verify';
          return;
        }
        this.pskIdentity = clientPskIdentity(msg.body);
        clearTimeout(this.#handshake.retransmitTimer); // flight 5 has begun: flight 4 arrived
        this.#state = 'psk_lookup';
        this.#startPskLookup(this.pskIdentity);
        return;
      case 'wait_certificate_verify':
        expectType(msg, HandshakeType.certificate_verify);
        checkCertificateVerify(msg.body, this.#handshake.signedMessages!, this.peerCertificates[0]);
        this.#handshake.signedMessages = undefined;
        this.#addToTranscript(msg);
        this.#state = 'wait_finished';
        return;
      case 'wait_finished':
        expectType(msg, HandshakeType.finished);
        this.#onClientFinished(msg);
        return;
      default:
        throw new TlsAlert(AlertDescription.unexpected_message, `unexpected handshake message ${msg.type}`);
    }
  }

  #startPskLookup(identity: string | undefined): void {
    (identity === undefined ? Promise.resolve(null) : lookupPskSafely(this.#config.lookupPsk, identity)).then(
      (psk) => this.#onPsk(psk),
      (err: unknown) => this.#fail(err, AlertDescription.internal_error),
    );
  }

  #onPsk(psk: Buffer | null): void {
    if (this.#state !== 'psk_lookup') return; // failed or closed meanwhile
    try {
      const { key, known } = pskOrStandIn(psk, this.pskIdentity);
      if (known) this.#handshake.pskHash = pskFingerprint(key);
      this.#installKeys(this.#deriveMaster(pskPreMasterSecret(key)));
      this.#state = 'wait_finished';
      this.#drainHandshake();
    } catch (err) {
      this.#fail(err, err instanceof TlsAlert ? err.description : AlertDescription.internal_error);
      return;
    }
    if (this.#state !== 'wait_finished') return; // (records queued behind a Finished that ended it go with the handshake)
    const queued = this.#handshake.queued;
    this.#handshake.queued = [];
    this.handleRecords(queued);
  }

  /** RFC 5246 §8.1 / RFC 7627 §4: the master secret from a premaster secret (the transcript now ends with ClientKeyExchange). */
  #deriveMaster(preMaster: Buffer): Buffer {
    const n = this.#negotiated;
    return n.extendedMasterSecret
      ? extendedMasterSecret(preMaster, this.#handshake.transcript.copy().digest())
      : masterSecret(preMaster, n.clientRandom, n.serverRandom);
  }

  /** Key expansion: epoch 1 becomes readable; the server write protection waits for our CCS. */
  #installKeys(master: Buffer): void {
    const n = this.#negotiated;
    this.#handshake.masterBytes = master;
    this.#handshake.master = new HmacSha256Key(master);
    this.#handshake.keyBlock = keyExpansion(this.#handshake.master, n.serverRandom, n.clientRandom, keyBlockLength(n.suite));
    const p = epoch1Protections(n.suite, this.#handshake.keyBlock, this.connectionId, this.peerConnectionId);
    this.#records.installReadEpoch(1, p.read, p.readCid);
    this.#handshake.serverWrite = p.write;
    this.#handshake.serverWriteCid = p.writeCid;
  }

  #onClientFinished(msg: HandshakeMessage): void {
    checkClientFinished(this.#handshake.master!, this.#handshake.transcript.copy().digest(), msg.body);
    this.#addToTranscript(msg);
    this.#awaitedFlightStart = this.#handshake.reassembler!.nextSeq;
    clearTimeout(this.#handshake.handshakeTimer);
    clearTimeout(this.#handshake.retransmitTimer);
    clearTimeout(this.#handshake.wrongKeyTimer);
    if (this.resumed) {
      // Abbreviated handshake: the client's Finished ends it; a repeat of it needs no answer.
      this.#state = 'established';
      this.#flight = undefined;
    } else {
      const finished = flight6Finished(this.#handshake.master!, this.#handshake.transcript.digest(), this.#nextSendSeq++);
      this.#records.installWriteEpoch(1, this.#handshake.serverWrite, this.#handshake.serverWriteCid);
      this.#state = 'established';
      // Flight 6 is the last flight: it is not retransmitted on a timer, only when the client repeats flight 5.
      this.#sendFlight({ plain: [], encrypted: [finished] }, false);
      const n = this.#negotiated;
      const cached = {
        masterSecret: this.#handshake.masterBytes!,
        suiteId: n.suite.id,
        extendedMasterSecret: n.extendedMasterSecret,
        peerCertificates: this.peerCertificates,
      };
      this.#config.cache.store(
        n.sessionId,
        this.pskIdentity === undefined || !this.#handshake.pskHash ? cached : { ...cached, pskIdentity: this.pskIdentity, pskHash: this.#handshake.pskHash },
      );
    }
    const n = this.#negotiated;
    const keys: SessionKeys = {
      suiteId: n.suite.id,
      extendedMasterSecret: n.extendedMasterSecret,
      keyBlock: this.#handshake.keyBlock!,
      sessionId: owned(n.sessionId),
      peerCertificates: this.peerCertificates.map((c) => c.raw),
      ...(this.connectionId ? { connectionId: this.connectionId } : {}),
      ...(this.peerConnectionId ? { peerConnectionId: this.peerConnectionId } : {}),
      ...(this.pskIdentity !== undefined ? { pskIdentity: this.pskIdentity } : {}),
    };
    this.#shed();
    this.#refreshIdle();
    this.#host.established(this, keys);
  }

  /**
   * An established session keeps only what its records need (the record layer's keys and windows, the suite, the
   * session id, and flight 6 for a client that repeats flight 5): the transcript, the master secret, the ECDHE key,
   * the negotiation's buffers (slices of the ClientHello's datagram) and the handshake timers go. Long-lived small
   * buffers are copied into their own memory so they do not hold a 64 KiB receive buffer alive.
   */
  #shed(): void {
    const n = this.#negotiated;
    const ecdheGroup = this.#handshake.ephemeral?.group ?? n.ecdheGroup;
    this.#negotiated = settled(
      {
        suite: n.suite,
        extendedMasterSecret: n.extendedMasterSecret,
        secureRenegotiation: n.secureRenegotiation,
        clientSentPointFormats: n.clientSentPointFormats,
        ...(ecdheGroup !== undefined ? { ecdheGroup } : {}),
      },
      n.resumed !== undefined,
    );
    this.#sessionIdText = n.sessionId.toString('latin1');
    this.#records.endEpoch0();
    this.#hs = undefined;
    const f = this.#flight;
    if (f && f.plain.length === 0 && f.encrypted.length === 1 && f.encrypted[0].type === HandshakeType.finished) {
      this.#finished6 = f.encrypted[0].body.toString('latin1');
      this.#flight = undefined;
    } else if (f) {
      this.#flight = { plain: f.plain.map(ownedMessage), encrypted: f.encrypted.map(ownedMessage) };
    }
  }

  // ---- flights out ------------------------------------------------------------------------------------------

  /** Sends a flight packed into datagrams of at most `mtu` bytes; arms the retransmission timer unless told not to. */
  #sendFlight(flight: Flight, arm = true): void {
    this.#flight = flight;
    const mtu = this.#config.mtu;
    const datagrams: Buffer[] = [];
    let current: Buffer[] = [];
    let size = 0;
    const add = (record: Buffer): void => {
      if (size + record.length > mtu && current.length > 0) {
        datagrams.push(Buffer.concat(current));
        current = [];
        size = 0;
      }
      current.push(record);
      size += record.length;
    };
    const header = RECORD_HEADER_LENGTH + HANDSHAKE_HEADER_LENGTH;
    for (const msg of flight.plain) {
      for (const frag of fragmentMessage(msg, mtu - header)) add(this.#records.seal(0, ContentType.handshake, frag));
    }
    if (flight.encrypted.length > 0) {
      add(this.#records.seal(0, ContentType.change_cipher_spec, CCS));
      for (const msg of flight.encrypted) {
        for (const frag of fragmentMessage(msg, mtu - header - this.#negotiated.suite.maxOverhead - this.#records.cidOverhead(1)))
          add(this.#records.seal(1, ContentType.handshake, frag));
      }
    }
    if (current.length > 0) datagrams.push(Buffer.concat(current));
    for (const d of datagrams) this.#host.send(this, d);
    clearTimeout(this.#hs?.retransmitTimer);
    if (arm && this.#state !== 'established') {
      this.#handshake.retransmitTimer = setTimeout(() => this.#onRetransmitTimer(), this.#handshake.retransmitMs);
    }
  }

  #onRetransmitTimer(): void {
    if (this.#state === 'closed' || this.#state === 'established' || !this.#flight) return;
    this.#handshake.retransmitMs = Math.min(this.#handshake.retransmitMs * 2, this.#config.maxRetransmitMs);
    this.#sendFlight(this.#flight);
  }

  #sendAlert(level: number, description: number): void {
    const epoch = this.#state === 'established' ? 1 : 0;
    try {
      this.#host.send(this, this.#records.seal(epoch, ContentType.alert, Buffer.from([level, description])));
    } catch {
      // sequence space exhausted: nothing sensible left to send
    }
  }

  #refreshIdle(): void {
    if (this.#state !== 'established') return;
    this.#lastActive = Date.now() - CLOCK_BASE;
  }

  /** Ends a handshake: optional fatal alert to the peer, then the server's 'handshakeError'. */
  #fail(err: unknown, alert: number | undefined): void {
    if (this.#state === 'closed') return;
    if (this.#state === 'established') {
      this.#end();
      return;
    }
    if (alert !== undefined) this.#sendAlert(AlertLevel.fatal, alert);
    this.#end(err instanceof Error ? err : new Error(String(err)));
  }

  #end(handshakeError?: Error): void {
    const wasEstablished = this.#state === 'established';
    this.#state = 'closed';
    const hs = this.#hs;
    if (hs) {
      clearTimeout(hs.retransmitTimer);
      clearTimeout(hs.handshakeTimer);
      clearTimeout(hs.wrongKeyTimer);
      hs.queued = [];
    }
    if (handshakeError) this.#host.handshakeFailed(this, handshakeError);
    this.#host.closed(this);
    if (wasEstablished) this.emit('close');
  }
}

/** What the session cache keeps of a PSK: enough to see it changed, not the key itself. */
function pskFingerprint(psk: Buffer): Buffer {
  return createHash('sha256').update('gridgate dtls psk fingerprint\0').update(psk).digest();
}
