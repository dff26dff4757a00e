/**
 * Cipher-suite abstraction shared by TLS and DTLS record layers (modelled on pion/dtls: one file per suite).
 *
 * `seq` is the 8-byte sequence number as it appears in the MAC/AAD input: for TLS the 64-bit record counter,
 * for DTLS epoch(2) || sequence_number(6). Suites never see the stream.
 */
export interface RecordProtection {
  /**
   * Protects `plaintext` as a record fragment of content `type`. Returns a buffer whose first `headroom` bytes are
   * left for the caller's record header, followed by the protected fragment.
   */
  seal(seq: Buffer, type: number, version: number, plaintext: Buffer, headroom: number): Buffer;
  /** Verifies and decrypts a fragment; throws TlsAlert(bad_record_mac) on any failure (padding or MAC alike). */
  open(seq: Buffer, type: number, version: number, fragment: Buffer): Buffer;
}

export interface CipherSuite {
  /** IANA code point. */
  readonly id: number;
  /** IANA name, e.g. TLS_PSK_WITH_AES_128_CCM_8. */
  readonly name: string;
  readonly macKeyLength: number;
  readonly encKeyLength: number;
  /** Implicit (fixed) IV bytes taken from the key block (4 for AEAD suites, 0 for CBC). */
  readonly fixedIvLength: number;
  /** Maximum number of bytes `seal` adds to a plaintext (explicit nonce/IV, tag or MAC + padding). */
  readonly maxOverhead: number;
  /** Creates the protection for one direction. */
  createProtection(macKey: Buffer, encKey: Buffer, fixedIv: Buffer): RecordProtection;
}

export function keyBlockLength(s: CipherSuite): number {
  return 2 * (s.macKeyLength + s.encKeyLength + s.fixedIvLength);
}

/** Writes the 13-byte additional data seq(8) || type(1) || version(2) || length(2) into `out`. */
export function writeAdditionalData(out: Buffer, seq: Buffer, type: number, version: number, length: number): Buffer {
  seq.copy(out, 0, 0, 8);
  out[8] = type;
  out[9] = version >> 8;
  out[10] = version & 0xff;
  out[11] = length >> 8;
  out[12] = length & 0xff;
  return out;
}
