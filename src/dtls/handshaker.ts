/**
 * The handshake of one DTLS association, from the ClientHello with a valid cookie to the client's Finished: the state
 * machine, the PSK look-ups, the key schedule, the transcript, the flights and their retransmission. The connection
 * (session.ts) makes one per handshake, hands it the handshake records and lets it go once established, so an idle
 * session holds none of it (as pion/dtls keeps its handshaker apart from its Conn). The state machine is all in
 * `#onMessage`:
 *
 *   (ClientHello with cookie, full handshake, PSK suite: send flight 4)    wait_client_key_exchange
 *   wait_client_key_exchange ──ClientKeyExchange──▶ psk_lookup        (records queued, async lookupPsk)
 *   psk_lookup ──PSK found, keys derived──▶ wait_finished                (epoch 1 readable)
 *   (… ECDHE_ECDSA suite: flight 4 adds Certificate, ServerKeyExchange, CertificateRequest)   wait_client_certificate
 *   wait_client_certificate ──Certificate, chain verified──▶ wait_client_key_exchange
 *   wait_client_key_exchange ──ClientKeyExchange, ECDH, keys derived──▶ wait_certificate_verify
 *   wait_certificate_verify ──signature ok──▶ wait_finished
 *   wait_finished ──Finished ok──▶ (send flight 6) done                  (the connection is established)
 *   (ClientHello resuming a cached PSK session id)  resume_lookup ──same PSK──▶ (flight 4b) | ──else──▶ (flight 4)
 *   (ClientHello resuming a cached session id: send flight 4b = ServerHello, CCS, Finished)   wait_finished
 *   wait_finished ──Finished ok──▶ done                                  (abbreviated handshake, nothing sent)
 *   Records that fail authentication are dropped silently in every state (RFC 6347 §4.1.2.7).
 *
 * Flight sending follows pion/dtls: the last flight is kept, retransmitted on a timer that doubles from 1 s to
 * 60 s, and re-sent at once when the peer retransmits its previous flight.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { X509Certificate } from 'node:crypto';
import { AlertDescription, TlsAlert } from '../tls/alert.ts';
import { isEcdheEcdsa } from '../tls/ecdhe-ecdsa.ts';
import { HandshakeType, expectType, findExtension } from '../tls/messages.ts';
import type { ClientHello } from '../tls/messages.ts';
import { HmacSha256Key, keyExpansion } from '../tls/prf.ts';
import { deriveMasterSecret, pskMasterSecret } from '../tls/psk-handshake.ts';
import { lookupPskSafely } from '../tls/psk.ts';
import { keyBlockLength } from '../tls/suites/index.ts';
import type { CipherSuite } from '../tls/suites/index.ts';
import { EXTENSION_CONNECTION_ID, encodeConnectionIdExtension, parseConnectionIdExtension, suiteSupportsCid } from './cid.ts';
import { flightDatagrams } from './flights/datagrams.ts';
import type { Flight } from './flights/datagrams.ts';
import { flight4, negotiate, serverHello } from './flights/flight4.ts';
import type { Negotiated } from './flights/flight4.ts';
import { certificateKeyExchange } from './flights/flight4-certificate.ts';
import type { ServerCertificate } from './flights/flight4-certificate.ts';
import { checkCertificateVerify, clientCertificates } from './flights/flight5-certificate.ts';
import { checkClientFinished } from './flights/flight5-finished.ts';
import { clientPskIdentity, pskOrStandIn } from './flights/flight5-psk.ts';
import { flight6Finished } from './flights/flight6.ts';
import { HandshakeReassembler, parseHandshakeFragments, transcriptBytes } from './handshake.ts';
import type { HandshakeMessage } from './handshake.ts';
import { HandshakeState } from './handshake-state.ts';
import type { DtlsRecord, RecordLayer } from './record.ts';
import type { CachedSession, SessionCache } from './session-cache.ts';
import { epoch1Protections } from './session-state.ts';
import type { SessionKeys } from './session-state.ts';
import { keptFlight, owned, settled } from './settled.ts';

/** What a handshake is configured with (the server's SessionConfig carries it). */
export interface HandshakeConfig {
  lookupPsk(identity: string): Promise<Buffer | null>;
  /** Present when the ECDHE_ECDSA suites are offered. */
  certificate?: ServerCertificate;
  suites: readonly CipherSuite[];
  cache: SessionCache;
  /** Whether a cached session may be resumed now (PSK sessions: always; certificate sessions: chain still trusted). */
  resumable(s: CachedSession): boolean;
  mtu: number;
  handshakeTimeoutMs: number;
  initialRetransmitMs: number;
  maxRetransmitMs: number;
}

/** The ClientHello (its cookie checked) a handshake starts from, and the sequence number of its record. */
export interface HelloStart {
  ch: ClientHello;
  msg: HandshakeMessage;
  recordSeq: number;
}

/** What the handshake learns of the peer, written where the connection's users read it (the session itself). */
export interface HandshakePeer {
  pskIdentity: string | undefined;
  peerCertificates: X509Certificate[];
  offeredCertificateSubject: string | undefined;
}

/** What the handshake hands the connection once the client's Finished checked out. */
export interface HandshakeDone {
  /** The negotiation as an established session keeps it (settled.ts). */
  negotiated: Negotiated;
  sessionId: Buffer;
  /** What a later process needs to carry the session on (session-state.ts). */
  keys: SessionKeys;
  /** The last flight, to send again when the client repeats its own: flight 6 as its verify_data, or none. */
  flight?: Flight;
  finished6?: string;
  /** message_seq of the first message of a client flight after the handshake; the next message_seq of ours. */
  awaitedFlightStart: number;
  nextSendSeq: number;
}

/** What the handshake needs of its connection (session.ts). */
export interface HandshakeLink {
  peer: HandshakePeer;
  records: RecordLayer;
  send(datagram: Buffer): void;
  /** Ends the handshake: a fatal alert to the peer when given, then the server's 'handshakeError'. */
  fail(err: unknown, alert: number | undefined): void;
  /** Records that waited for a look-up, handled now as if they had just arrived. */
  replay(records: DtlsRecord[]): void;
  established(done: HandshakeDone): void;
}

type Step =
  | 'wait_client_certificate'
  | 'wait_client_key_exchange'
  | 'wait_certificate_verify'
  | 'psk_lookup'
  | 'resume_lookup'
  | 'wait_finished'
  /** established, failed or closed: nothing more happens here */
  | 'done';

const MAX_QUEUED_RECORDS = 32;

export class Handshaker {
  /** The negotiation in progress (the connection reads its suite, session id and `resumed` through it until done). */
  readonly negotiated: Negotiated;
  /** The CID this server issued for the session, and the one the client asked for, if a CID was negotiated. */
  readonly connectionId: Buffer | undefined;
  readonly peerConnectionId: Buffer | undefined;
  readonly #config: HandshakeConfig;
  readonly #link: HandshakeLink;
  readonly #hs: HandshakeState;
  #step: Step = 'wait_client_key_exchange';
  #nextSendSeq: number;
  /** message_seq of the first message of the client flight we wait for (or would wait for after the last). */
  #awaitedFlightStart: number;
  #flight: Flight | undefined;

  /**
   * Negotiates from a ClientHello whose cookie the server verified (and issues a CID when the client offers the
   * extension); start() then sends the first flight. Throws TlsAlert when nothing acceptable was offered.
   */
  constructor(config: HandshakeConfig, link: HandshakeLink, start: HelloStart, allocateCid: () => Buffer) {
    this.#config = config;
    this.#link = link;
    const { ch, msg, recordSeq } = start;
    const n = negotiate(ch, { suites: config.suites, cache: config.cache, stillValid: config.resumable });
    this.negotiated = n;
    // RFC 9146 §3: the client's extension holds the CID it wants to receive; ours holds the one we want to receive.
    const offered = findExtension(ch.extensions, EXTENSION_CONNECTION_ID);
    if (offered && suiteSupportsCid(n.suite.id)) {
      this.peerConnectionId = Buffer.from(parseConnectionIdExtension(offered.data));
      this.connectionId = allocateCid();
      n.extraExtensions.push({ type: EXTENSION_CONNECTION_ID, data: encodeConnectionIdExtension(this.connectionId) });
    }
    this.#hs = new HandshakeState(config.initialRetransmitMs);
    this.#hs.reassembler = new HandshakeReassembler(msg.messageSeq + 1);
    this.#awaitedFlightStart = msg.messageSeq + 1;
    link.records.setInitialWriteSequence(recordSeq);
    this.#hs.signedMessages = []; // until #startFull knows whether a CertificateVerify will need them
    this.#addToTranscript(msg);
    this.#nextSendSeq = msg.messageSeq; // the server's message_seq continues from the ClientHello's (RFC 6347 §4.2.2)
  }

  /** Arms the handshake timeout and sends flight 4 (full) or 4b (abbreviated), or first confirms a PSK resumption. */
  start(): void {
    const n = this.negotiated;
    this.#hs.handshakeTimer = setTimeout(() => this.#link.fail(new Error('DTLS handshake timeout'), undefined), this.#config.handshakeTimeoutMs);
    if (n.resumed?.pskHash) this.#confirmResumption(n.resumed, n.resumed.pskHash);
    else if (n.resumed) this.#startAbbreviated(n.resumed);
    else this.#startFull();
  }

  /** The ECDHE group of a certificate handshake (IANA number), once chosen. */
  get ecdheGroup(): number | undefined {
    return this.#hs.ephemeral?.group;
  }

  /** While a look-up runs, records wait here (a bounded number; more are dropped): true when `r` was taken. */
  queue(r: DtlsRecord): boolean {
    if (this.#step !== 'psk_lookup' && this.#step !== 'resume_lookup') return false;
    if (this.#hs.queued.length < MAX_QUEUED_RECORDS) this.#hs.queued.push(r);
    return true;
  }

  /** A handshake record's content; true when it shows the peer retransmitting its previous flight. */
  onRecord(data: Buffer): boolean {
    let retransmit = false;
    for (const f of parseHandshakeFragments(data)) {
      // A message from before the flight we now await means our last flight was lost: send it again.
      if (this.#hs.reassembler!.push(f) === 'old' && f.messageSeq < this.#awaitedFlightStart) retransmit = true;
    }
    this.#drain();
    return retransmit;
  }

  /**
   * A record failed authentication. Dropped silently (RFC 6347 §4.1.2.7): anyone who knows the address can send a
   * record that fails. A client with another key fails every time, so when no authentic Finished follows within two
   * of its retransmission periods (one lost or displaced Finished is sent again within one), the verdict is a wrong
   * key, with the alert the client can act on, long before the handshake timeout.
   */
  onBadRecord(): void {
    if (this.#step !== 'wait_finished' || this.#hs.wrongKeyTimer) return;
    this.#hs.wrongKeyTimer = setTimeout(
      () =>
        this.#link.fail(
          new TlsAlert(AlertDescription.bad_record_mac, 'client Finished record failed authentication (wrong key?)'),
          AlertDescription.bad_record_mac,
        ),
      2 * this.#config.initialRetransmitMs,
    );
  }

  /** The peer repeated its previous flight: ours goes again at once (the timer is not re-armed). */
  resend(): void {
    if (this.#flight) this.#sendFlight(this.#flight, false);
  }

  /** The connection ended: timers stop, queued records go, and a look-up that comes back finds nothing to do. */
  stop(): void {
    this.#step = 'done';
    clearTimeout(this.#hs.retransmitTimer);
    clearTimeout(this.#hs.handshakeTimer);
    clearTimeout(this.#hs.wrongKeyTimer);
    this.#hs.queued = [];
  }

  /** False while a look-up runs or after the end: handshake messages then wait in the reassembler. */
  #processing(): boolean {
    return this.#step !== 'psk_lookup' && this.#step !== 'resume_lookup' && this.#step !== 'done';
  }

  #drain(): void {
    // The client Finished ends the loop: the reassembler goes with the handshake.
    while (this.#processing()) {
      const msg = this.#hs.reassembler!.next();
      if (!msg) return;
      this.#onMessage(msg);
    }
  }

  #onMessage(msg: HandshakeMessage): void {
    const peer = this.#link.peer;
    switch (this.#step) {
      case 'wait_client_certificate':
        expectType(msg, HandshakeType.certificate);
        clearTimeout(this.#hs.retransmitTimer); // flight 5 has begun: flight 4 arrived
        peer.peerCertificates = clientCertificates(msg.body, this.#config.certificate!.trustAnchors(), (subject) => {
          peer.offeredCertificateSubject = subject;
        });
        this.#addToTranscript(msg);
        this.#step = 'wait_client_key_exchange';
        return;
      case 'wait_client_key_exchange':
        expectType(msg, HandshakeType.client_key_exchange);
        this.#addToTranscript(msg);
        if (this.#hs.ephemeral) {
          this.#installKeys(deriveMasterSecret(this.#hs.ephemeral.premasterFromClientKeyExchange(msg.body), this.negotiated, this.#sessionHash));
          this.#step = 'wait_certificate_verify';
          return;
        }
        peer.pskIdentity = clientPskIdentity(msg.body);
        clearTimeout(this.#hs.retransmitTimer); // flight 5 has begun: flight 4 arrived
        this.#step = 'psk_lookup';
        this.#startPskLookup(peer.pskIdentity);
        return;
      case 'wait_certificate_verify':
        expectType(msg, HandshakeType.certificate_verify);
        checkCertificateVerify(msg.body, this.#hs.signedMessages!, peer.peerCertificates[0]);
        this.#hs.signedMessages = undefined;
        this.#addToTranscript(msg);
        this.#step = 'wait_finished';
        return;
      case 'wait_finished':
        expectType(msg, HandshakeType.finished);
        this.#onClientFinished(msg);
        return;
      default:
        throw new TlsAlert(AlertDescription.unexpected_message, `unexpected handshake message ${msg.type}`);
    }
  }

  /** RFC 7627 §4's session hash: the transcript so far (it ends with the ClientKeyExchange when the master is derived). */
  #sessionHash = (): Buffer => this.#hs.transcript.copy().digest();

  /**
   * A PSK session resumes only while its identity still has the same key (a deleted device or a changed key must
   * not live on in the cache): the lookup runs first, records wait, and a mismatch turns into a full handshake.
   */
  #confirmResumption(cached: CachedSession, pskHash: Buffer): void {
    this.#step = 'resume_lookup';
    lookupPskSafely(this.#config.lookupPsk, cached.pskIdentity ?? '').then(
      (psk) => {
        if (this.#step !== 'resume_lookup') return; // failed or closed meanwhile
        const n = this.negotiated;
        if (psk && Buffer.isBuffer(psk) && timingSafeEqual(pskFingerprint(psk), pskHash)) {
          this.#startAbbreviated(cached);
        } else {
          this.#config.cache.delete(n.sessionId);
          delete n.resumed;
          n.sessionId = this.#config.cache.newId();
          this.#step = 'wait_client_key_exchange';
          this.#startFull();
        }
        const queued = this.#hs.queued;
        this.#hs.queued = [];
        this.#link.replay(queued);
      },
      (err: unknown) => this.#link.fail(err, AlertDescription.internal_error),
    );
  }

  #startFull(): void {
    const n = this.negotiated;
    let keyExchange: Array<{ type: number; body: Buffer }> = [];
    if (isEcdheEcdsa(n.suite.id)) {
      const kx = certificateKeyExchange(n, this.#config.certificate!);
      this.#hs.ephemeral = kx.ephemeral;
      keyExchange = kx.messages;
      this.#step = 'wait_client_certificate';
    } else {
      this.#hs.signedMessages = undefined;
    }
    const messages = flight4(n, this.#nextSendSeq, keyExchange);
    for (const m of messages) this.#addToTranscript(m);
    this.#nextSendSeq += messages.length;
    this.#sendFlight({ plain: messages, encrypted: [] });
  }

  /** Flight 4b (RFC 5246 §7.3 abbreviated handshake): ServerHello with the client's session id, CCS, Finished. */
  #startAbbreviated(cached: CachedSession): void {
    this.#hs.signedMessages = undefined;
    this.#link.peer.pskIdentity = cached.pskIdentity;
    this.#link.peer.peerCertificates = cached.peerCertificates;
    const sh = serverHello(this.negotiated, this.#nextSendSeq++);
    this.#addToTranscript(sh);
    this.#installKeys(cached.masterSecret);
    this.#link.records.installWriteEpoch(1, this.#hs.serverWrite, this.#hs.serverWriteCid);
    const finished = flight6Finished(this.#hs.master!, this.#hs.transcript.copy().digest(), this.#nextSendSeq++);
    this.#addToTranscript(finished);
    this.#step = 'wait_finished';
    this.#sendFlight({ plain: [sh], encrypted: [finished] });
  }

  /** Hashes a handshake message into the transcript (and keeps it while a CertificateVerify may need it). */
  #addToTranscript(msg: HandshakeMessage): void {
    const bytes = transcriptBytes(msg);
    this.#hs.transcript.update(bytes);
    this.#hs.signedMessages?.push(bytes);
  }

  #startPskLookup(identity: string | undefined): void {
    (identity === undefined ? Promise.resolve(null) : lookupPskSafely(this.#config.lookupPsk, identity)).then(
      (psk) => this.#onPsk(psk),
      (err: unknown) => this.#link.fail(err, AlertDescription.internal_error),
    );
  }

  #onPsk(psk: Buffer | null): void {
    if (this.#step !== 'psk_lookup') return; // failed or closed meanwhile
    try {
      const { key, known } = pskOrStandIn(psk, this.#link.peer.pskIdentity);
      if (known) this.#hs.pskHash = pskFingerprint(key);
      this.#installKeys(pskMasterSecret(key, this.negotiated, this.#sessionHash));
      this.#step = 'wait_finished';
      this.#drain();
    } catch (err) {
      this.#link.fail(err, err instanceof TlsAlert ? err.description : AlertDescription.internal_error);
      return;
    }
    if (this.#step !== 'wait_finished') return; // (records queued behind a Finished that ended it go with the handshake)
    const queued = this.#hs.queued;
    this.#hs.queued = [];
    this.#link.replay(queued);
  }

  /** Key expansion: epoch 1 becomes readable; the server write protection waits for our CCS. */
  #installKeys(master: Buffer): void {
    const n = this.negotiated;
    const hs = this.#hs;
    hs.masterBytes = master;
    hs.master = new HmacSha256Key(master);
    hs.keyBlock = keyExpansion(hs.master, n.serverRandom, n.clientRandom, keyBlockLength(n.suite));
    const p = epoch1Protections(n.suite, hs.keyBlock, this.connectionId, this.peerConnectionId);
    this.#link.records.installReadEpoch(1, p.read, p.readCid);
    hs.serverWrite = p.write;
    hs.serverWriteCid = p.writeCid;
  }

  #onClientFinished(msg: HandshakeMessage): void {
    const hs = this.#hs;
    const peer = this.#link.peer;
    checkClientFinished(hs.master!, hs.transcript.copy().digest(), msg.body);
    this.#addToTranscript(msg);
    this.#awaitedFlightStart = hs.reassembler!.nextSeq;
    clearTimeout(hs.handshakeTimer);
    clearTimeout(hs.retransmitTimer);
    clearTimeout(hs.wrongKeyTimer);
    const n = this.negotiated;
    if (n.resumed) {
      // Abbreviated handshake: the client's Finished ends it; a repeat of it needs no answer.
      this.#step = 'done';
      this.#flight = undefined;
    } else {
      const finished = flight6Finished(hs.master!, hs.transcript.digest(), this.#nextSendSeq++);
      this.#link.records.installWriteEpoch(1, hs.serverWrite, hs.serverWriteCid);
      this.#step = 'done';
      // Flight 6 is the last flight: it is not retransmitted on a timer, only when the client repeats flight 5.
      this.#sendFlight({ plain: [], encrypted: [finished] }, false);
      const cached = {
        masterSecret: hs.masterBytes!,
        suiteId: n.suite.id,
        extendedMasterSecret: n.extendedMasterSecret,
        peerCertificates: peer.peerCertificates,
      };
      this.#config.cache.store(
        n.sessionId,
        peer.pskIdentity === undefined || !hs.pskHash ? cached : { ...cached, pskIdentity: peer.pskIdentity, pskHash: hs.pskHash },
      );
    }
    const keys: SessionKeys = {
      suiteId: n.suite.id,
      extendedMasterSecret: n.extendedMasterSecret,
      keyBlock: hs.keyBlock!,
      sessionId: owned(n.sessionId),
      peerCertificates: peer.peerCertificates.map((c) => c.raw),
      ...(this.connectionId ? { connectionId: this.connectionId } : {}),
      ...(this.peerConnectionId ? { peerConnectionId: this.peerConnectionId } : {}),
      ...(peer.pskIdentity !== undefined ? { pskIdentity: peer.pskIdentity } : {}),
    };
    // What the established session keeps (settled.ts): the transcript, the master secret, the ECDHE key, the
    // negotiation's buffers (slices of the ClientHello's datagram) and the timers stay here and go with this object.
    const ecdheGroup = hs.ephemeral?.group ?? n.ecdheGroup;
    this.#link.established({
      negotiated: settled(
        {
          suite: n.suite,
          extendedMasterSecret: n.extendedMasterSecret,
          secureRenegotiation: n.secureRenegotiation,
          clientSentPointFormats: n.clientSentPointFormats,
          ...(ecdheGroup !== undefined ? { ecdheGroup } : {}),
        },
        n.resumed !== undefined,
      ),
      sessionId: n.sessionId,
      keys,
      ...keptFlight(this.#flight),
      awaitedFlightStart: this.#awaitedFlightStart,
      nextSendSeq: this.#nextSendSeq,
    });
  }

  /** Sends a flight packed into datagrams of at most `mtu` bytes; arms the retransmission timer unless told not to. */
  #sendFlight(flight: Flight, arm = true): void {
    this.#flight = flight;
    for (const d of flightDatagrams(flight, this.#link.records, this.negotiated.suite, this.#config.mtu)) this.#link.send(d);
    clearTimeout(this.#hs.retransmitTimer);
    if (arm && this.#step !== 'done') this.#hs.retransmitTimer = setTimeout(() => this.#onRetransmitTimer(), this.#hs.retransmitMs);
  }

  #onRetransmitTimer(): void {
    if (this.#step === 'done' || !this.#flight) return;
    this.#hs.retransmitMs = Math.min(this.#hs.retransmitMs * 2, this.#config.maxRetransmitMs);
    this.#sendFlight(this.#flight);
  }
}

/** What the session cache keeps of a PSK: enough to see it changed, not the key itself. */
function pskFingerprint(psk: Buffer): Buffer {
  return createHash('sha256').update('gridgate dtls psk fingerprint\0').update(psk).digest();
}
