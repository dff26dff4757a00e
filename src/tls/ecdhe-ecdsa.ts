/**
 * ECDHE_ECDSA on secp256r1 for TLS/DTLS 1.2 (RFC 8422, RFC 7251, RFC 5289): the two suites RFC 7252 names for
 * certificate-authenticated CoAP, and the message bodies their handshake adds — Certificate (RFC 5246 §7.4.2),
 * ServerKeyExchange with named-curve ECDHE parameters signed by the server's ECDSA key (RFC 8422 §5.4),
 * CertificateRequest for ecdsa_sign (§7.4.4), the client's ECDH public value (RFC 8422 §5.7) and CertificateVerify
 * (§7.4.8). Signatures are ecdsa_secp256r1_sha256 (0x0403), DER-encoded as TLS carries them.
 */
import { createECDH, sign, verify } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { AlertDescription, TlsAlert } from './alert.ts';
import { ByteReader, findExtension } from './messages.ts';
import type { Extension } from './messages.ts';
import { AeadProtection } from './suites/aead.ts';
import type { CipherSuite } from './suites/types.ts';

export const TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8: CipherSuite = {
  id: 0xc0ae,
  name: 'TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8',
  macKeyLength: 0,
  encKeyLength: 16,
  fixedIvLength: 4,
  maxOverhead: 8 + 8,
  createProtection: (_macKey, encKey, fixedIv) => new AeadProtection('aes-128-ccm', 8, encKey, fixedIv),
};

export const TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: CipherSuite = {
  id: 0xc02b,
  name: 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256',
  macKeyLength: 0,
  encKeyLength: 16,
  fixedIvLength: 4,
  maxOverhead: 8 + 16,
  createProtection: (_macKey, encKey, fixedIv) => new AeadProtection('aes-128-gcm', 16, encKey, fixedIv),
};

/** In server preference order (after the PSK suites). */
export const ECDHE_ECDSA_SUITES: readonly CipherSuite[] = [TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256];

export function isEcdheEcdsa(suiteId: number): boolean {
  return ECDHE_ECDSA_SUITES.some((s) => s.id === suiteId);
}

export const ExtensionTypeEc = { supported_groups: 10, ec_point_formats: 11, signature_algorithms: 13 } as const;
export const SECP256R1 = 23;
export const ECDSA_SECP256R1_SHA256 = 0x0403;
const NAMED_CURVE = 3;
const UNCOMPRESSED = 0;
const ECDSA_SIGN = 64;

/** Alerts of RFC 5246 §7.2.2 that the certificate path needs (not in the PSK-only alert table). */
export const CertificateAlert = { bad_certificate: 42, unsupported_certificate: 43, certificate_expired: 45, unknown_ca: 48 } as const;

function u16List(data: Buffer): number[] {
  const r = new ByteReader(data);
  const list = r.vec16();
  r.end();
  if (list.length % 2 !== 0) throw new TlsAlert(AlertDescription.decode_error, 'odd-length list');
  const out: number[] = [];
  for (let i = 0; i < list.length; i += 2) out.push(list.readUInt16BE(i));
  return out;
}

/**
 * Whether a ClientHello allows ECDHE_ECDSA with secp256r1, uncompressed points and ecdsa_secp256r1_sha256
 * (an absent extension means the RFC default, which includes them).
 */
export function clientAcceptsP256Ecdsa(exts: Extension[]): boolean {
  const groups = findExtension(exts, ExtensionTypeEc.supported_groups);
  if (groups && !u16List(groups.data).includes(SECP256R1)) return false;
  const formats = findExtension(exts, ExtensionTypeEc.ec_point_formats);
  if (formats) {
    const r = new ByteReader(formats.data);
    const list = r.vec8();
    r.end();
    if (!list.includes(UNCOMPRESSED)) return false;
  }
  const sigs = findExtension(exts, ExtensionTypeEc.signature_algorithms);
  if (sigs && !u16List(sigs.data).includes(ECDSA_SECP256R1_SHA256)) return false;
  return true;
}

/** ServerHello ec_point_formats: uncompressed only (RFC 8422 §5.2). */
export const SERVER_EC_POINT_FORMATS: Extension = { type: ExtensionTypeEc.ec_point_formats, data: Buffer.from([1, UNCOMPRESSED]) };

/** Certificate body: certificate_list<0..2^24-1> of ASN.1Cert<1..2^24-1>, sender's certificate first. */
export function encodeCertificate(chainDer: Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const c of chainDer) {
    const len = Buffer.alloc(3);
    len.writeUIntBE(c.length, 0, 3);
    parts.push(len, c);
  }
  const list = Buffer.concat(parts);
  const len = Buffer.alloc(3);
  len.writeUIntBE(list.length, 0, 3);
  return Buffer.concat([len, list]);
}

export function parseCertificate(body: Buffer): Buffer[] {
  if (body.length < 3 || body.readUIntBE(0, 3) !== body.length - 3) throw new TlsAlert(AlertDescription.decode_error, 'bad Certificate length');
  const out: Buffer[] = [];
  let o = 3;
  while (o < body.length) {
    if (body.length - o < 3) throw new TlsAlert(AlertDescription.decode_error, 'bad certificate entry');
    const n = body.readUIntBE(o, 3);
    if (n === 0 || o + 3 + n > body.length) throw new TlsAlert(AlertDescription.decode_error, 'bad certificate entry');
    out.push(body.subarray(o + 3, o + 3 + n));
    o += 3 + n;
  }
  return out;
}

/** One ephemeral P-256 key pair and its ServerECDHParams (curve_type named_curve, secp256r1, uncompressed point). */
export class EphemeralP256 {
  readonly #ecdh = createECDH('prime256v1');
  readonly params: Buffer;

  constructor() {
    const point = this.#ecdh.generateKeys();
    this.params = Buffer.concat([Buffer.from([NAMED_CURVE, 0, SECP256R1, point.length]), point]);
  }

  /** The premaster secret (the shared point's x coordinate) from the client's ClientKeyExchange body. */
  premasterFromClientKeyExchange(body: Buffer): Buffer {
    const r = new ByteReader(body);
    const point = r.vec8();
    r.end();
    if (point.length !== 65 || point[0] !== 4) throw new TlsAlert(AlertDescription.illegal_parameter, 'client ECDH point is not an uncompressed P-256 point');
    try {
      return this.#ecdh.computeSecret(point);
    } catch {
      throw new TlsAlert(AlertDescription.illegal_parameter, 'client ECDH point is not on the curve');
    }
  }
}

/** ServerKeyExchange body: params ‖ SignatureAndHashAlgorithm ‖ signature over client_random ‖ server_random ‖ params. */
export function encodeServerKeyExchange(params: Buffer, clientRandom: Buffer, serverRandom: Buffer, key: KeyObject): Buffer {
  const sig = sign('sha256', Buffer.concat([clientRandom, serverRandom, params]), key);
  const head = Buffer.alloc(4);
  head.writeUInt16BE(ECDSA_SECP256R1_SHA256, 0);
  head.writeUInt16BE(sig.length, 2);
  return Buffer.concat([params, head, sig]);
}

/** CertificateRequest body: ecdsa_sign, ecdsa_secp256r1_sha256, no certificate_authorities hint. */
export function encodeCertificateRequest(): Buffer {
  return Buffer.from([1, ECDSA_SIGN, 0, 2, ECDSA_SECP256R1_SHA256 >> 8, ECDSA_SECP256R1_SHA256 & 0xff, 0, 0]);
}

/**
 * Checks a CertificateVerify body against the handshake messages it signs and the client's public key; throws
 * decrypt_error for a bad signature (RFC 5246 §7.4.8) and illegal_parameter for an algorithm we did not offer.
 */
export function verifyCertificateVerify(body: Buffer, signedMessages: Buffer, publicKey: KeyObject): void {
  const r = new ByteReader(body);
  const alg = r.u16();
  const sig = r.vec16();
  r.end();
  if (alg !== ECDSA_SECP256R1_SHA256) throw new TlsAlert(AlertDescription.illegal_parameter, `CertificateVerify algorithm 0x${alg.toString(16)} not offered`);
  let ok: boolean;
  try {
    ok = verify('sha256', signedMessages, publicKey, sig);
  } catch {
    ok = false; // not even a DER signature
  }
  if (!ok) throw new TlsAlert(AlertDescription.decrypt_error, 'CertificateVerify signature does not verify');
}
