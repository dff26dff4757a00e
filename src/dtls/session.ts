/**
 * One DTLS association with a peer address:port, from the ClientHello with a valid cookie to close: the connection.
 * It dispatches the records of each datagram, carries application data both ways, and handles alerts, close and
 * idleness; the handshake itself runs in a Handshaker (handshaker.ts, which holds the state machine) that the session
 * lets go once established. Beside it: migration.ts (where answers go, RFC 9146 §6) and write-lease.ts (a kept
 * session's lease of sequence numbers).
 *
 *   handshake ──client Finished ok──▶ established ──close_notify, fatal alert, idle, release──▶ closed
 *   established: application data both ways; a retransmitted client flight 5 gets flight 6 again;
 *                new handshake messages in epoch 1 → warning no_renegotiation (nothing is reassembled any more);
 *                close_notify → close; only authentic (epoch 1) records count as activity against the idle timeout;
 *                an authentic, newest tls12_cid record from another address moves the session (RFC 9146 §6),
 *                unless the server refuses the move.
 *   Records that fail authentication are dropped silently in every state (RFC 6347 §4.1.2.7); a resumption ends
 *   only by an authenticated alert.
 */
import { X509Certificate } from 'node:crypto';
import { AlertDescription, AlertLevel, TlsAlert, TlsPeerAlert } from '../tls/alert.ts';
import { HandshakeType } from '../tls/messages.ts';
import { flightDatagrams } from './flights/datagrams.ts';
import type { Flight } from './flights/datagrams.ts';
import type { Negotiated } from './flights/flight4.ts';
import { parseHandshakeFragments } from './handshake.ts';
import { Handshaker } from './handshaker.ts';
import type { HandshakeConfig, HandshakeDone, HelloStart } from './handshaker.ts';
import { followPeer } from './migration.ts';
import type { PeerRoute, Relay } from './migration.ts';
import { ContentType, RECORD_HEADER_LENGTH, RecordLayer } from './record.ts';
import type { DtlsRecord } from './record.ts';
import { ReplayWindow } from './replay.ts';
import { SessionEvents } from './session-events.ts';
import { certificatesFromDer, epoch1Protections } from './session-state.ts';
import type { SessionKeys, SessionMotion } from './session-state.ts';
import { settled } from './settled.ts';
import { holdForLease, leaseRunningOut, leaseUsedUp, renewLease, sessionMotion } from './write-lease.ts';

export type { PeerRoute, Relay };

export interface SessionConfig extends HandshakeConfig {
  idleTimeoutMs: number;
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

type State = 'handshake' | 'established' | 'closed';

/**
 * A session's last activity is kept in ms since this module loaded: a small integer for the first 24 days of the
 * process (Date.now() itself would take a heap number of 16 bytes in every idle session), a heap number after that.
 */
const CLOCK_BASE = Date.now();
const NO_CERTIFICATES: X509Certificate[] = [];

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
  /** Until established: the handshake (handshaker.ts); undefined once established or carried on. */
  #handshaker: Handshaker | undefined;
  /** The handshaker's negotiation until established, then the settled one (settled.ts). */
  #negotiated: Negotiated;
  #state: State = 'handshake';
  #nextSendSeq = 0;
  /** message_seq of the first message of a client flight after the handshake (an older one asks for flight 6 again). */
  #awaitedFlightStart = 0;
  #flight: Flight | undefined;
  /** Established: the session id as a latin1 string (an idle session holds 32 characters rather than a Buffer). */
  #sessionIdText: string | undefined;
  /** Established by a full handshake: flight 6's Finished verify_data (latin1), until the client's data shows it arrived. */
  #finished6: string | undefined;
  /** Application data waiting for a renewed lease of sequence numbers (a kept session: write-lease.ts); made when needed. */
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
  constructor(host: SessionHost, config: SessionConfig, peer: { address: string; port: number }, start: HelloStart | KeptStart) {
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
      this.#state = 'established';
      this.#records.endEpoch0();
      this.#restored = true;
      this.#lastActive = motion.lastActive - CLOCK_BASE;
      return;
    }
    const handshaker = new Handshaker(
      config,
      {
        peer: this,
        records: this.#records,
        send: (d) => host.send(this, d),
        fail: (err, alert) => this.#fail(err, alert),
        replay: (records) => this.handleRecords(records),
        established: (done) => this.#established(done),
      },
      start,
      () => host.allocateCid(),
    );
    this.#handshaker = handshaker;
    this.#negotiated = handshaker.negotiated;
    this.connectionId = handshaker.connectionId;
    this.peerConnectionId = handshaker.peerConnectionId;
    handshaker.start();
  }

  /** The client's Finished checked out: the session keeps what its records need (settled.ts) and the handshake goes. */
  #established(done: HandshakeDone): void {
    this.#state = 'established';
    this.#negotiated = done.negotiated;
    this.#sessionIdText = done.sessionId.toString('latin1');
    this.#records.endEpoch0();
    this.#handshaker = undefined;
    this.#flight = done.flight;
    this.#finished6 = done.finished6;
    this.#awaitedFlightStart = done.awaitedFlightStart;
    this.#nextSendSeq = done.nextSendSeq;
    this.#refreshIdle();
    this.#host.established(this, done.keys);
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
    const held = renewLease(this.#records, limit, this.#awaitingLease);
    this.#awaitingLease = undefined;
    for (const data of held) {
      if (this.#state !== 'established') return;
      this.send(data);
    }
  }

  /** What moves with every record, for session-state.ts (`attachment`: the application's bytes). */
  motion(attachment?: Buffer): SessionMotion {
    return sessionMotion(this.#records, this, this.#lastActive + CLOCK_BASE, attachment);
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
    const g = this.#negotiated.ecdheGroup ?? this.#handshaker?.ecdheGroup;
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
      if (leaseUsedUp(this.#records)) {
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
      if (leaseRunningOut(this.#records)) this.#host.leaseRunningOut?.(this);
      o += max;
    } while (o < data.length);
  }

  #holdForLease(data: Buffer): void {
    if (!holdForLease((this.#awaitingLease ??= []), data)) this.#end();
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
      if (this.#handshaker?.queue(r)) continue; // a look-up runs: the record waits for it
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
    if (this.#handshaker) {
      this.#handshaker.resend();
      return;
    }
    const flight = this.#flight ?? this.#flight6();
    if (!flight) return;
    for (const d of flightDatagrams(flight, this.#records, this.#negotiated.suite, this.#config.mtu)) this.#host.send(this, d);
    if (this.#finished6 !== undefined) this.#flight = undefined; // an idle session keeps the 12 bytes, not the flight
  }

  /** Flight 6 again from its verify_data (a client that repeats flight 5 did not get it). */
  #flight6(): Flight | undefined {
    if (this.#finished6 === undefined) return undefined;
    return { plain: [], encrypted: [{ type: HandshakeType.finished, messageSeq: this.#nextSendSeq - 1, body: Buffer.from(this.#finished6, 'latin1') }] };
  }

  /** Returns true when the record shows the peer retransmitting its previous flight. */
  #onRecord(r: DtlsRecord, from: PeerRoute | undefined): boolean {
    const data = this.#records.open(r);
    if (data === 'bad_mac') {
      this.#handshaker?.onBadRecord();
      return false;
    }
    if (data === 'drop') return false;
    // Before the record's content is acted on, so an answer to it already goes to the new address. Only an
    // established session moves (the handshake finishes where it started).
    if (from && r.cid !== undefined && this.#records.lastOpenedWasNewest && this.#state === 'established') followPeer(this, from, this.#host);
    // Once established, epoch 0 carries only retransmissions of the client's last flight; a plaintext alert or
    // data there could come from anyone who knows the address.
    if (this.#state === 'established' && r.epoch === 0 && r.type !== ContentType.handshake) return false;
    if (r.epoch !== 0) this.#refreshIdle();
    switch (r.type) {
      case ContentType.handshake:
        return this.#state === 'established' ? this.#onEstablishedHandshakeRecord(data, r.epoch) : this.#handshaker!.onRecord(data);
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

  // ---- out, and the end ----------------------------------------------------------------------------------------

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
    this.#handshaker?.stop();
    if (handshakeError) this.#host.handshakeFailed(this, handshakeError);
    this.#host.closed(this);
    if (wasEstablished) this.emit('close');
  }
}
