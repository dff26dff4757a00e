/**
 * DTLS 1.2 record layer (RFC 6347 §4.1): the 13-byte header (type, version, epoch, 48-bit sequence number, length),
 * several records per datagram, per-epoch protection and anti-replay. Knows nothing of the handshake: the caller
 * installs a RecordProtection for an epoch and asks to open or seal records.
 *
 * Records that fail the MAC, arrive for an epoch without keys, or replay an old sequence number are silently
 * dropped (`open` returns 'drop' or 'bad_mac'), as §4.1.2.7 recommends.
 *
 * With a Connection ID (RFC 9146) an epoch's records use the tls12_cid format (content type 25, the CID in the
 * header, the real type inside the encryption): `installReadEpoch`/`installWriteEpoch` take the CID and its
 * protection; an epoch with a read CID accepts only tls12_cid records carrying exactly that CID.
 */
import { ContentType } from '../tls/record.ts';
import type { RecordProtection } from '../tls/suites/index.ts';
import { CONTENT_TYPE_TLS12_CID } from './cid.ts';
import type { CidProtection } from './cid.ts';
import { ReplayWindow } from './replay.ts';

export { ContentType };

export const DTLS12 = 0xfefd;
/** DTLS 1.0: the record version some clients put on their first ClientHello. */
export const DTLS10 = 0xfeff;
export const RECORD_HEADER_LENGTH = 13;
/** DTLSCiphertext.length limit: 2^14 + 2048. */
export const MAX_RECORD_LENGTH = 16384 + 2048;
export const MAX_SEQUENCE = 2 ** 48 - 1;

export interface DtlsRecord {
  /** Content type; for a tls12_cid record 25 until `RecordLayer.open` replaces it by the real (inner) type. */
  type: number;
  version: number;
  epoch: number;
  seq: number;
  fragment: Buffer;
  /** tls12_cid records only: the connection id from the header. */
  cid?: Buffer;
}

/**
 * Splits a datagram into records. Stops at the first malformed header; what was parsed before is kept.
 * tls12_cid records are recognised only when `cidLength` (the length of the CIDs this endpoint issues) is given.
 */
export function parseDatagram(datagram: Buffer, cidLength = 0): DtlsRecord[] {
  const out: DtlsRecord[] = [];
  let o = 0;
  while (datagram.length - o >= RECORD_HEADER_LENGTH) {
    const type = datagram[o];
    const withCid = type === CONTENT_TYPE_TLS12_CID && cidLength > 0;
    if (!withCid && (type < ContentType.change_cipher_spec || type > ContentType.application_data)) break;
    const headerLength = RECORD_HEADER_LENGTH + (withCid ? cidLength : 0);
    if (datagram.length - o < headerLength) break;
    const version = datagram.readUInt16BE(o + 1);
    const length = datagram.readUInt16BE(o + headerLength - 2);
    const end = o + headerLength + length;
    if (datagram[o + 1] !== 0xfe || length > MAX_RECORD_LENGTH || end > datagram.length) break;
    const r: DtlsRecord = {
      type,
      version,
      epoch: datagram.readUInt16BE(o + 3),
      seq: datagram.readUIntBE(o + 5, 6),
      fragment: datagram.subarray(o + headerLength, end),
    };
    if (withCid) r.cid = datagram.subarray(o + 11, o + 11 + cidLength);
    out.push(r);
    o = end;
  }
  return out;
}

export function writeRecordHeader(out: Buffer, offset: number, r: Omit<DtlsRecord, 'fragment'>, length: number): void {
  out[offset] = r.type;
  out.writeUInt16BE(r.version, offset + 1);
  out.writeUInt16BE(r.epoch, offset + 3);
  out.writeUIntBE(r.seq, offset + 5, 6);
  out.writeUInt16BE(length, offset + 11);
}

export function encodeRecord(r: DtlsRecord): Buffer {
  const out = Buffer.allocUnsafe(RECORD_HEADER_LENGTH + r.fragment.length);
  writeRecordHeader(out, 0, r, r.fragment.length);
  r.fragment.copy(out, RECORD_HEADER_LENGTH);
  return out;
}

/** The 8-byte epoch ‖ sequence_number that RFC 6347 §4.1.2.1 puts in the MAC/AAD input (the suites' `seq`). */
export function sequenceInput(epoch: number, seq: number, out: Buffer = Buffer.allocUnsafe(8)): Buffer {
  out.writeUInt16BE(epoch, 0);
  out.writeUIntBE(seq, 2, 6);
  return out;
}

interface ReadEpoch {
  protection: RecordProtection | null;
  replay: ReplayWindow;
  cid?: EpochCid;
}

/** Epoch 0's read state: a window, or after the handshake one that refuses nothing. */
type Epoch0 = Omit<ReadEpoch, 'replay'> & { replay: Pick<ReplayWindow, 'check' | 'isNewest' | 'accept'> };

/**
 * Epoch 0 once the handshake is over (see RecordLayer.endEpoch0): plaintext that only ever asks for flight 6 again,
 * at most one answer per datagram and no larger, so no window is kept for it; one object for every session.
 */
const EPOCH0_AFTER_HANDSHAKE: Epoch0 = Object.freeze({ protection: null, replay: { check: () => true, isNewest: () => false, accept: () => undefined } });

/** The CID of one direction of an epoch and the protection of its tls12_cid records. */
export interface EpochCid {
  cid: Buffer;
  protection: CidProtection;
}

/** Scratch for the 8-byte MAC/AAD sequence input: filled and consumed synchronously within one seal or open. */
const SEQ_SCRATCH = Buffer.alloc(8);

/**
 * Read and write state of one association: epochs, sequence numbers, protection, anti-replay. A session has epoch 0
 * and, after the handshake, epoch 1 (renegotiation is refused), so the state is a few fields per epoch, not maps:
 * an idle session holds thousands of these.
 */
export class RecordLayer {
  #read0: Epoch0 = { protection: null, replay: new ReplayWindow() };
  #read1: ReadEpoch | undefined;
  #writeSeq0 = 0;
  #writeSeq1: number | undefined;
  #writeProtection1: RecordProtection | undefined;
  #writeCid1: EpochCid | undefined;
  /**
   * Epoch 1 seals stop here (session-state.ts: a session restored elsewhere continues past it, so no nonce repeats).
   * Undefined: no limit but the sequence space (a number above 2^31 would take a heap number in every idle session).
   */
  #writeLimit1: number | undefined;
  /** Whether the last record `open` accepted had the highest sequence number of its epoch so far (RFC 9146 §6). */
  lastOpenedWasNewest = false;

  /** The handshake is over: epoch 0 keeps no replay window of its own any more. */
  endEpoch0(): void {
    this.#read0 = EPOCH0_AFTER_HANDSHAKE;
  }

  /** Starts epoch 0 writes at `seq` (RFC 6347 §4.2.1: continue from the ClientHello's record sequence number). */
  setInitialWriteSequence(seq: number): void {
    this.#writeSeq0 = seq;
  }

  /** `protection` is only used for records without a CID: null when the epoch has a read CID. */
  installReadEpoch(epoch: number, protection: RecordProtection | null, cid?: EpochCid, replay = new ReplayWindow()): void {
    if (epoch !== 1) throw new Error('only epoch 1 follows the handshake');
    this.#read1 = cid ? { protection, replay, cid } : { protection, replay };
  }

  /** `protection` is only used without a write CID (then it may be undefined). `seq`: the first sequence number to send. */
  installWriteEpoch(epoch: number, protection: RecordProtection | undefined, cid?: EpochCid, seq = 0): void {
    if (epoch !== 1) throw new Error('only epoch 1 follows the handshake');
    this.#writeProtection1 = protection;
    this.#writeSeq1 = seq;
    this.#writeCid1 = cid;
  }

  /** Epoch 1 seals throw from sequence number `limit` on. */
  setWriteLimit(limit: number): void {
    this.#writeLimit1 = limit > MAX_SEQUENCE ? undefined : limit;
  }

  get writeLimit(): number {
    return this.#writeLimit1 ?? MAX_SEQUENCE + 1;
  }

  /** Epoch-1 records that may still be sealed before the write limit. */
  writeRoom(): number {
    return this.writeLimit - (this.#writeSeq1 ?? 0);
  }

  /** Epoch 1: the next write sequence number and the replay window (ReplayWindow.snapshot), for session-state.ts. */
  epoch1State(): { writeSeq: number; replay: [number, number, number] } {
    if (this.#writeSeq1 === undefined || !this.#read1) throw new Error('epoch 1 is not installed');
    return { writeSeq: this.#writeSeq1, replay: this.#read1.replay.snapshot() };
  }

  /** Bytes a sealed record in `epoch` carries beyond the suite's overhead: the CID and the inner content type. */
  cidOverhead(epoch: number): number {
    const c = epoch === 1 ? this.#writeCid1 : undefined;
    return c ? c.cid.length + 1 : 0;
  }

  hasReadEpoch(epoch: number): boolean {
    return epoch === 0 || (epoch === 1 && this.#read1 !== undefined);
  }

  /**
   * Verifies, decrypts and replay-checks a record. 'drop' (unknown epoch, replay, oversize) and 'bad_mac' both
   * mean: discard it; a session tells them apart only to recognise, over time, a client with a wrong key.
   */
  open(r: DtlsRecord): Buffer | 'drop' | 'bad_mac' {
    this.lastOpenedWasNewest = false;
    const state = r.epoch === 0 ? this.#read0 : r.epoch === 1 ? this.#read1 : undefined;
    if (!state || !state.replay.check(r.seq)) return 'drop';
    if ((r.type === CONTENT_TYPE_TLS12_CID) !== (state.cid !== undefined)) return 'drop';
    let data = r.fragment;
    if (state.cid) {
      if (!r.cid || !r.cid.equals(state.cid.cid)) return 'drop';
      try {
        const inner = state.cid.protection.open(r.version, r.epoch, r.seq, r.cid, r.fragment);
        r.type = inner.type;
        data = inner.content;
      } catch {
        return 'bad_mac';
      }
      if (data.length > 16384) return 'drop';
    } else if (state.protection) {
      try {
        data = state.protection.open(sequenceInput(r.epoch, r.seq, SEQ_SCRATCH), r.type, r.version, r.fragment);
      } catch {
        return 'bad_mac';
      }
      if (data.length > 16384) return 'drop';
    }
    this.lastOpenedWasNewest = state.replay.isNewest(r.seq);
    state.replay.accept(r.seq);
    return data;
  }

  /** Protects and frames one record in `epoch` with the next write sequence number. */
  seal(epoch: number, type: number, data: Buffer): Buffer {
    const seq = epoch === 0 ? this.#writeSeq0 : epoch === 1 ? this.#writeSeq1 : undefined;
    if (seq === undefined) throw new Error(`no write state for epoch ${epoch}`);
    if (seq > MAX_SEQUENCE || (epoch === 1 && this.#writeLimit1 !== undefined && seq >= this.#writeLimit1)) throw new Error('record sequence number exhausted');
    if (epoch === 0) this.#writeSeq0 = seq + 1;
    else this.#writeSeq1 = seq + 1;
    const cid = epoch === 1 ? this.#writeCid1 : undefined;
    if (cid) {
      const headerLength = RECORD_HEADER_LENGTH + cid.cid.length;
      const out = cid.protection.seal(DTLS12, epoch, seq, cid.cid, type, data, headerLength);
      writeRecordHeader(out, 0, { type: CONTENT_TYPE_TLS12_CID, version: DTLS12, epoch, seq }, 0);
      cid.cid.copy(out, 11);
      out.writeUInt16BE(out.length - headerLength, headerLength - 2);
      return out;
    }
    const prot = epoch === 1 ? this.#writeProtection1 : undefined;
    const header = { type, version: DTLS12, epoch, seq };
    if (!prot) {
      if (epoch === 1) throw new Error('epoch 1 has no write protection');
      return encodeRecord({ ...header, fragment: data });
    }
    const out = prot.seal(sequenceInput(epoch, seq, SEQ_SCRATCH), type, DTLS12, data, RECORD_HEADER_LENGTH);
    writeRecordHeader(out, 0, header, out.length - RECORD_HEADER_LENGTH);
    return out;
  }
}
