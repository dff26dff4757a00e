import { createHash } from 'node:crypto';
import type { Hash } from 'node:crypto';
import type { EphemeralEcdhe } from '../tls/ecdhe-ecdsa.ts';
import type { HmacSha256Key } from '../tls/prf.ts';
import type { RecordProtection } from '../tls/suites/index.ts';
import type { HandshakeReassembler } from './handshake.ts';
import type { DtlsRecord, EpochCid } from './record.ts';

/**
 * What only the handshake needs: the transcript, the secrets and keys until they are handed over, records queued
 * during a lookup, the flight timers. One object the Handshaker (handshaker.ts) holds and the session drops with it
 * once established, so an idle session, of which a server holds hundreds of thousands, carries none of these fields.
 */
export class HandshakeState {
  readonly transcript: Hash = createHash('sha256');
  /** Until the client Finished: afterwards nothing is reassembled (see DtlsSession's #onEstablishedHandshakeRecord). */
  reassembler: HandshakeReassembler | undefined;
  queued: DtlsRecord[] = [];
  masterBytes: Buffer | undefined;
  /** Fingerprint of the PSK of a full PSK handshake, cached with the session for the resumption check. */
  pskHash: Buffer | undefined;
  /** The master secret as an HMAC key: key expansion and both Finished use it. */
  master: HmacSha256Key | undefined;
  serverWrite: RecordProtection | undefined;
  /** The key block until established (handed to the host with the session's keys). */
  keyBlock: Buffer | undefined;
  serverWriteCid: EpochCid | undefined;
  /** ECDHE_ECDSA only: our ephemeral key, and the handshake messages so far (what CertificateVerify signs). */
  ephemeral: EphemeralEcdhe | undefined;
  signedMessages: Buffer[] | undefined;
  retransmitMs: number;
  retransmitTimer: NodeJS.Timeout | undefined;
  handshakeTimer: NodeJS.Timeout | undefined;
  /** Armed by the first epoch-1 record that fails authentication before the client Finished: see Handshaker.onBadRecord. */
  wrongKeyTimer: NodeJS.Timeout | undefined;

  constructor(retransmitMs: number) {
    this.retransmitMs = retransmitMs;
  }
}
