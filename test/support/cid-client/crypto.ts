/**
 * Crypto of the test-only Connection ID client, written from the RFCs with node:crypto alone. It imports NOTHING
 * from src/: it is an independent second implementation, so a test that passes proves the server agrees with the
 * RFCs, not with itself.
 *
 *   RFC 5246 §5      PRF = P_SHA256(secret, label ‖ seed)
 *   RFC 4279 §2      plain-PSK premaster secret
 *   RFC 7627 §4      extended master secret over the session hash
 *   RFC 6655 §3      AES-128-CCM_8: nonce = client/server_write_IV(4) ‖ explicit nonce(8), 8-byte tag
 *   RFC 5487         AES-128-CBC + HMAC-SHA256, MAC-then-encrypt with an explicit random IV (RFC 5246 §6.2.3.2)
 *   RFC 9146 §4–5    tls12_cid records: DTLSInnerPlaintext and their additional data (AEAD §5.3, MAC §5.1)
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

export function pSha256(secret: Buffer, seed: Buffer, length: number): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  let a = seed;
  while (total < length) {
    a = createHmac('sha256', secret).update(a).digest();
    const block = createHmac('sha256', secret)
      .update(Buffer.concat([a, seed]))
      .digest();
    chunks.push(block);
    total += block.length;
  }
  return Buffer.concat(chunks).subarray(0, length);
}

export function prf(secret: Buffer, label: string, seed: Buffer, length: number): Buffer {
  return pSha256(secret, Buffer.concat([Buffer.from(label, 'ascii'), seed]), length);
}

export function pskPremaster(psk: Buffer): Buffer {
  const n = Buffer.alloc(2);
  n.writeUInt16BE(psk.length);
  return Buffer.concat([n, Buffer.alloc(psk.length), n, psk]);
}

export interface Keys {
  clientMac: Buffer;
  serverMac: Buffer;
  clientKey: Buffer;
  serverKey: Buffer;
  clientIv: Buffer;
  serverIv: Buffer;
}

/** RFC 5246 §6.3 key block: MAC keys (32 each for CBC-SHA256, none for CCM_8), AES keys (16 each), IVs (4 each for CCM_8). */
export function keyBlock(master: Buffer, serverRandom: Buffer, clientRandom: Buffer, cbc: boolean): Keys {
  const macLen = cbc ? 32 : 0;
  const ivLen = cbc ? 0 : 4;
  const kb = prf(master, 'key expansion', Buffer.concat([serverRandom, clientRandom]), 2 * (macLen + 16 + ivLen));
  let o = 0;
  const take = (n: number): Buffer => kb.subarray(o, (o += n));
  return { clientMac: take(macLen), serverMac: take(macLen), clientKey: take(16), serverKey: take(16), clientIv: take(ivLen), serverIv: take(ivLen) };
}

const TLS12_CID = 25;
const DTLS12 = Buffer.from([0xfe, 0xfd]);

function epochSeq(epoch: number, seq: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeUInt16BE(epoch, 0);
  b.writeUIntBE(seq, 2, 6);
  return b;
}

/** RFC 9146 §5.3 additional_data. */
export function cidAad(epoch: number, seq: number, cid: Buffer, innerLength: number): Buffer {
  const len = Buffer.alloc(2);
  len.writeUInt16BE(innerLength);
  return Buffer.concat([Buffer.alloc(8, 0xff), Buffer.from([TLS12_CID, cid.length, TLS12_CID]), DTLS12, epochSeq(epoch, seq), cid, len]);
}

function cidHeader(epoch: number, seq: number, cid: Buffer, length: number): Buffer {
  const len = Buffer.alloc(2);
  len.writeUInt16BE(length);
  return Buffer.concat([Buffer.from([TLS12_CID]), DTLS12, epochSeq(epoch, seq), cid, len]);
}

/** A whole tls12_cid record under AES-128-CBC + HMAC-SHA256: IV ‖ CBC(inner ‖ HMAC(aad ‖ inner) ‖ padding). */
export function sealCidRecordCbc(macKey: Buffer, key: Buffer, epoch: number, seq: number, cid: Buffer, type: number, content: Buffer, padding = 0): Buffer {
  const inner = Buffer.concat([content, Buffer.from([type]), Buffer.alloc(padding)]);
  const mac = createHmac('sha256', macKey)
    .update(cidAad(epoch, seq, cid, inner.length))
    .update(inner)
    .digest();
  const padLen = 15 - ((inner.length + 32) % 16);
  const iv = randomBytes(16);
  const c = createCipheriv('aes-128-cbc', key, iv).setAutoPadding(false);
  const body = Buffer.concat([iv, c.update(Buffer.concat([inner, mac, Buffer.alloc(padLen + 1, padLen)])), c.final()]);
  return Buffer.concat([cidHeader(epoch, seq, cid, body.length), body]);
}

/** Opens a CBC tls12_cid record body (test code: plain checks, no constant-time care). */
export function openCidRecordCbc(macKey: Buffer, key: Buffer, epoch: number, seq: number, cid: Buffer, body: Buffer): { type: number; content: Buffer } | null {
  if (body.length < 64 || body.length % 16 !== 0) return null;
  const d = createDecipheriv('aes-128-cbc', key, body.subarray(0, 16)).setAutoPadding(false);
  const dec = Buffer.concat([d.update(body.subarray(16)), d.final()]);
  const pad = dec[dec.length - 1];
  const innerLen = dec.length - 1 - pad - 32;
  if (innerLen < 1) return null;
  const mac = createHmac('sha256', macKey)
    .update(cidAad(epoch, seq, cid, innerLen))
    .update(dec.subarray(0, innerLen))
    .digest();
  if (!mac.equals(dec.subarray(innerLen, innerLen + 32))) return null;
  const inner = dec.subarray(0, innerLen);
  let i = inner.length - 1;
  while (i >= 0 && inner[i] === 0) i--;
  return i < 0 ? null : { type: inner[i], content: inner.subarray(0, i) };
}

/** A whole tls12_cid record: header with `cid`, explicit nonce = epoch ‖ seq, CCM_8 over content ‖ type ‖ padding. */
export function sealCidRecord(key: Buffer, iv: Buffer, epoch: number, seq: number, cid: Buffer, type: number, content: Buffer, padding = 0): Buffer {
  const inner = Buffer.concat([content, Buffer.from([type]), Buffer.alloc(padding)]);
  const explicit = epochSeq(epoch, seq);
  const c = createCipheriv('aes-128-ccm', key, Buffer.concat([iv, explicit]), { authTagLength: 8 });
  c.setAAD(cidAad(epoch, seq, cid, inner.length), { plaintextLength: inner.length });
  const body = Buffer.concat([explicit, c.update(inner), c.final(), c.getAuthTag()]);
  return Buffer.concat([cidHeader(epoch, seq, cid, body.length), body]);
}

/** Opens the body of a tls12_cid record; returns the inner type and content, or null when authentication fails. */
export function openCidRecord(key: Buffer, iv: Buffer, epoch: number, seq: number, cid: Buffer, body: Buffer): { type: number; content: Buffer } | null {
  const ctLen = body.length - 16;
  if (ctLen < 1) return null;
  const d = createDecipheriv('aes-128-ccm', key, Buffer.concat([iv, body.subarray(0, 8)]), { authTagLength: 8 });
  d.setAuthTag(body.subarray(8 + ctLen));
  d.setAAD(cidAad(epoch, seq, cid, ctLen), { plaintextLength: ctLen });
  let inner: Buffer;
  try {
    inner = Buffer.concat([d.update(body.subarray(8, 8 + ctLen)), d.final()]);
  } catch {
    return null;
  }
  let i = inner.length - 1;
  while (i >= 0 && inner[i] === 0) i--;
  return i < 0 ? null : { type: inner[i], content: inner.subarray(0, i) };
}
