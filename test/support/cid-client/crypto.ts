/**
 * Crypto of the test-only Connection ID client, written from the RFCs with node:crypto alone. It imports NOTHING
 * from src/: it is an independent second implementation, so a test that passes proves the server agrees with the
 * RFCs, not with itself.
 *
 *   RFC 5246 §5      PRF = P_SHA256(secret, label ‖ seed)
 *   RFC 4279 §2      plain-PSK premaster secret
 *   RFC 7627 §4      extended master secret over the session hash
 *   RFC 6655 §3      AES-128-CCM_8: nonce = client/server_write_IV(4) ‖ explicit nonce(8), 8-byte tag
 *   RFC 9146 §4–5    tls12_cid records: DTLSInnerPlaintext and their additional data
 */
import { createCipheriv, createDecipheriv, createHmac } from 'node:crypto';

export function pSha256(secret: Buffer, seed: Buffer, length: number): Buffer {
  const chunks: Buffer[] = [];
  let total = 0;
  let a = seed;
  while (total < length) {
    a = createHmac('sha256', secret).update(a).digest();
    const block = createHmac('sha256', secret).update(Buffer.concat([a, seed])).digest();
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

/** CCM_8 key block: no MAC keys; client key, server key (16 each), client IV, server IV (4 each). */
export function ccm8Keys(master: Buffer, serverRandom: Buffer, clientRandom: Buffer): { clientKey: Buffer; serverKey: Buffer; clientIv: Buffer; serverIv: Buffer } {
  const kb = prf(master, 'key expansion', Buffer.concat([serverRandom, clientRandom]), 40);
  return { clientKey: kb.subarray(0, 16), serverKey: kb.subarray(16, 32), clientIv: kb.subarray(32, 36), serverIv: kb.subarray(36, 40) };
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

/** A whole tls12_cid record: header with `cid`, explicit nonce = epoch ‖ seq, CCM_8 over content ‖ type ‖ padding. */
export function sealCidRecord(key: Buffer, iv: Buffer, epoch: number, seq: number, cid: Buffer, type: number, content: Buffer, padding = 0): Buffer {
  const inner = Buffer.concat([content, Buffer.from([type]), Buffer.alloc(padding)]);
  const explicit = epochSeq(epoch, seq);
  const c = createCipheriv('aes-128-ccm', key, Buffer.concat([iv, explicit]), { authTagLength: 8 });
  c.setAAD(cidAad(epoch, seq, cid, inner.length), { plaintextLength: inner.length });
  const body = Buffer.concat([explicit, c.update(inner), c.final(), c.getAuthTag()]);
  const len = Buffer.alloc(2);
  len.writeUInt16BE(body.length);
  return Buffer.concat([Buffer.from([TLS12_CID]), DTLS12, explicit, cid, len, body]);
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
