/**
 * TLS 1.2 pseudo-random function (RFC 5246 §5) with SHA-256, and the key schedule built on it:
 * master secret (§8.1), extended master secret (RFC 7627), key expansion (§6.3), Finished verify_data (§7.4.9),
 * and the plain-PSK premaster secret (RFC 4279 §2). Stateless; shared by the TLS and (future) DTLS servers.
 */
import { KeyObject, createHmac, createSecretKey } from 'node:crypto';

/**
 * P_SHA256(secret, seed) truncated to `length` bytes.
 * The secret is imported once as a KeyObject: in Node 24 an HMAC keyed by a raw Buffer costs ~5x one keyed by a
 * KeyObject, and P_hash needs 2 HMACs per 32 output bytes.
 */
export function pSha256(secret: Buffer | KeyObject, seed: Buffer, length: number): Buffer {
  const key = secret instanceof KeyObject ? secret : createSecretKey(secret);
  const out = Buffer.allocUnsafe(length);
  let a: Buffer = seed; // A(0)
  let off = 0;
  while (off < length) {
    a = createHmac('sha256', key).update(a).digest(); // A(i)
    const block = createHmac('sha256', key).update(a).update(seed).digest();
    off += block.copy(out, off, 0, Math.min(block.length, length - off));
  }
  return out;
}

/** PRF(secret, label, seed) = P_SHA256(secret, label + seed). */
export function prf(secret: Buffer | KeyObject, label: string, seed: Buffer, length: number): Buffer {
  return pSha256(secret, Buffer.concat([Buffer.from(label, 'latin1'), seed]), length);
}

export function masterSecret(preMaster: Buffer, clientRandom: Buffer, serverRandom: Buffer): Buffer {
  return prf(preMaster, 'master secret', Buffer.concat([clientRandom, serverRandom]), 48);
}

/** RFC 7627 §4: session_hash = Hash(handshake messages up to and including ClientKeyExchange). */
export function extendedMasterSecret(preMaster: Buffer, sessionHash: Buffer): Buffer {
  return prf(preMaster, 'extended master secret', sessionHash, 48);
}

/** key_block = PRF(master, "key expansion", server_random + client_random). */
export function keyExpansion(master: Buffer | KeyObject, serverRandom: Buffer, clientRandom: Buffer, length: number): Buffer {
  return prf(master, 'key expansion', Buffer.concat([serverRandom, clientRandom]), length);
}

export const VERIFY_DATA_LENGTH = 12;

/** verify_data = PRF(master, "client finished" | "server finished", Hash(handshake_messages))[0..11]. */
export function verifyData(master: Buffer | KeyObject, sender: 'client' | 'server', handshakeHash: Buffer): Buffer {
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
