/**
 * TLS 1.2 pseudo-random function (RFC 5246 §5) with SHA-256, and the key schedule built on it:
 * master secret (§8.1), extended master secret (RFC 7627), key expansion (§6.3), Finished verify_data (§7.4.9),
 * and the plain-PSK premaster secret (RFC 4279 §2). Stateless; shared by the TLS and (future) DTLS servers.
 */
import { KeyObject, hash } from 'node:crypto';

const BLOCK = 64;
const DIGEST = 32;

/**
 * An HMAC-SHA256 key in its RFC 2104 form: the key XOR ipad and XOR opad blocks, made once per secret. An HMAC
 * is then two one-shot `crypto.hash` calls over a prefix-padded scratch buffer — no Hmac or KeyObject per call
 * (Node 24: createHmac keyed by a Buffer costs ~18 µs, by a KeyObject ~4 µs, this ~1 µs). The digests come back as
 * latin1 strings and are written where they belong: a Buffer made by native code costs ~1.4 µs more than the hash.
 */
export class HmacSha256Key {
  /** key ⊕ 0x36… (64 bytes) */
  readonly ipad: Buffer;
  /** key ⊕ 0x5c… (64 bytes) followed by room for the inner digest */
  readonly outer: Buffer;

  constructor(secret: Buffer | KeyObject) {
    let key = secret instanceof KeyObject ? secret.export() : secret;
    if (key.length > BLOCK) key = hash('sha256', key, 'buffer');
    this.ipad = Buffer.alloc(BLOCK, 0x36);
    this.outer = Buffer.alloc(BLOCK + DIGEST, 0x5c);
    for (let i = 0; i < key.length; i++) {
      this.ipad[i] ^= key[i];
      this.outer[i] ^= key[i];
    }
  }

  /** HMAC over `input[BLOCK…end)` (`input[0…BLOCK)` is overwritten with the inner pad), as a latin1 string. */
  macPrefixed(input: Buffer, end: number): string {
    this.ipad.copy(input, 0);
    this.outer.write(hash('sha256', input.subarray(0, end), 'binary'), BLOCK, 'latin1');
    return hash('sha256', this.outer, 'binary');
  }

  /** HMAC-SHA256(key, data). */
  mac(data: Buffer): Buffer {
    const input = scratch(BLOCK + data.length);
    data.copy(input, BLOCK);
    const out = Buffer.allocUnsafe(DIGEST);
    out.write(this.macPrefixed(input, BLOCK + data.length), 0, 'latin1');
    input.fill(0, 0, BLOCK);
    return out;
  }
}

/** Scratch for HMAC inputs, shared: filled and consumed synchronously within one call. */
let SCRATCH = Buffer.alloc(512);
function scratch(n: number): Buffer {
  if (SCRATCH.length < n) SCRATCH = Buffer.alloc(Math.max(n, 2 * SCRATCH.length));
  return SCRATCH;
}

/** A PRF secret: raw bytes, a KeyObject, or (cheapest when one secret serves several PRF calls) its HMAC key form. */
export type PrfSecret = Buffer | KeyObject | HmacSha256Key;

/**
 * P_SHA256(secret, seed) truncated to `length` bytes: A(i) = HMAC(A(i-1)), output blocks HMAC(A(i) ‖ seed).
 * One scratch buffer laid out as [pad (64) ‖ A(i) (32) ‖ seed] serves both HMACs of each step.
 */
export function pSha256(secret: PrfSecret, seed: Buffer, length: number): Buffer {
  const key = secret instanceof HmacSha256Key ? secret : new HmacSha256Key(secret);
  const out = Buffer.allocUnsafe(length);
  const buf = scratch(BLOCK + DIGEST + seed.length);
  // A(1) = HMAC(seed): [pad ‖ seed] first, then the seed moves behind A.
  seed.copy(buf, BLOCK);
  const a1 = key.macPrefixed(buf, BLOCK + seed.length);
  seed.copy(buf, BLOCK + DIGEST);
  buf.write(a1, BLOCK, 'latin1');
  let off = 0;
  for (;;) {
    off += out.write(key.macPrefixed(buf, BLOCK + DIGEST + seed.length), off, Math.min(DIGEST, length - off), 'latin1');
    if (off >= length) break;
    buf.write(key.macPrefixed(buf, BLOCK + DIGEST), BLOCK, 'latin1'); // A(i+1) = HMAC(A(i))
  }
  buf.fill(0, 0, BLOCK + DIGEST + seed.length);
  return out;
}

/** PRF(secret, label, seed) = P_SHA256(secret, label + seed). */
export function prf(secret: PrfSecret, label: string, seed: Buffer, length: number): Buffer {
  const labelled = Buffer.allocUnsafe(label.length + seed.length);
  labelled.write(label, 0, 'latin1');
  seed.copy(labelled, label.length);
  return pSha256(secret, labelled, length);
}

export function masterSecret(preMaster: Buffer, clientRandom: Buffer, serverRandom: Buffer): Buffer {
  return prf(preMaster, 'master secret', Buffer.concat([clientRandom, serverRandom]), 48);
}

/** RFC 7627 §4: session_hash = Hash(handshake messages up to and including ClientKeyExchange). */
export function extendedMasterSecret(preMaster: Buffer, sessionHash: Buffer): Buffer {
  return prf(preMaster, 'extended master secret', sessionHash, 48);
}

/** key_block = PRF(master, "key expansion", server_random + client_random). */
export function keyExpansion(master: PrfSecret, serverRandom: Buffer, clientRandom: Buffer, length: number): Buffer {
  return prf(master, 'key expansion', Buffer.concat([serverRandom, clientRandom]), length);
}

export const VERIFY_DATA_LENGTH = 12;

/** verify_data = PRF(master, "client finished" | "server finished", Hash(handshake_messages))[0..11]. */
export function verifyData(master: PrfSecret, sender: 'client' | 'server', handshakeHash: Buffer): Buffer {
  return prf(master, sender === 'client' ? 'client finished' : 'server finished', handshakeHash, VERIFY_DATA_LENGTH);
}

/** RFC 4279 §2 plain PSK: uint16 N, N zero bytes, uint16 N, psk. */
export function pskPreMasterSecret(psk: Buffer): Buffer {
  const n = psk.length;
  const out = Buffer.alloc(4 + 2 * n);
  out.writeUInt16BE(n, 0);
  out.writeUInt16BE(n, 2 + n);
  psk.copy(out, 4 + n);
  return out;
}

/** Splits a key block into the six RFC 5246 §6.3 parts. */
export interface KeyMaterial {
  clientMacKey: Buffer;
  serverMacKey: Buffer;
  clientKey: Buffer;
  serverKey: Buffer;
  clientIv: Buffer;
  serverIv: Buffer;
}

export function splitKeyBlock(block: Buffer, macLen: number, keyLen: number, ivLen: number): KeyMaterial {
  let o = 0;
  const take = (n: number): Buffer => block.subarray(o, (o += n));
  return {
    clientMacKey: take(macLen),
    serverMacKey: take(macLen),
    clientKey: take(keyLen),
    serverKey: take(keyLen),
    clientIv: take(ivLen),
    serverIv: take(ivLen),
  };
}
