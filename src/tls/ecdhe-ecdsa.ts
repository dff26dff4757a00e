/**
 * ECDHE_ECDSA for TLS/DTLS 1.2 (RFC 8422, RFC 7251, RFC 5289): the two suites RFC 7252 names for
 * certificate-authenticated CoAP, and the message bodies their handshake adds — Certificate (RFC 5246 §7.4.2),
 * ServerKeyExchange with named-curve ECDHE parameters (x25519 when the client offers it, else secp256r1) signed by
 * the server's ECDSA P-256 key (RFC 8422 §5.4),
 * CertificateRequest for ecdsa_sign (§7.4.4), the client's ECDH public value (RFC 8422 §5.7) and CertificateVerify
 * (§7.4.8). Signatures are ecdsa_secp256r1_sha256 (0x0403), DER-encoded as TLS carries them.
 */
import { createECDH, createPublicKey, diffieHellman, generateKeyPairSync, sign, verify } from 'node:crypto';
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
export const X25519 = 29;
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
 * The ECDHE group for ECDHE_ECDSA with this ClientHello, or undefined when it cannot be done: x25519 when offered,
 * else secp256r1 (also when supported_groups is absent); uncompressed points and ecdsa_secp256r1_sha256 (our
 * server key) must be allowed too (an absent extension means the RFC default, which includes them).
 */
export function chooseEcdheGroup(exts: Extension[]): number | undefined {
  const groupsExt = findExtension(exts, ExtensionTypeEc.supported_groups);
  const groups = groupsExt ? u16List(groupsExt.data) : [SECP256R1];
  const group = [X25519, SECP256R1].find((g) => groups.includes(g));
  if (group === undefined) return undefined;
  const formats = findExtension(exts, ExtensionTypeEc.ec_point_formats);
  if (formats) {
    const r = new ByteReader(formats.data);
    const list = r.vec8();
    r.end();
    if (!list.includes(UNCOMPRESSED)) return undefined;
  }
  const sigs = findExtension(exts, ExtensionTypeEc.signature_algorithms);
  if (sigs && !u16List(sigs.data).includes(ECDSA_SECP256R1_SHA256)) return undefined;
  return group;
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

/** DER SubjectPublicKeyInfo prefix of an X25519 key (RFC 8410): the 32 raw bytes follow. */
const X25519_SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');

/**
 * One ephemeral ECDHE key pair and its ServerECDHParams (curve_type named_curve, the group, the public value:
 * an uncompressed point for secp256r1, 32 bytes for x25519 per RFC 8422 §5.11).
 */
export class EphemeralEcdhe {
  readonly group: number;
  readonly params: Buffer;
  readonly #premaster: (peer: Buffer) => Buffer;

  constructor(group: number = SECP256R1) {
    this.group = group;
    let pub: Buffer;
    if (group === X25519) {
      const { privateKey, publicKey } = generateKeyPairSync('x25519');
      pub = publicKey.export({ format: 'der', type: 'spki' }).subarray(X25519_SPKI_PREFIX.length);
      this.#premaster = (peer) => {
        if (peer.length !== 32) throw new TlsAlert(AlertDescription.illegal_parameter, 'client x25519 value is not 32 bytes');
        let shared: Buffer;
        try {
          shared = diffieHellman({ privateKey, publicKey: createPublicKey({ key: Buffer.concat([X25519_SPKI_PREFIX, peer]), format: 'der', type: 'spki' }) });
        } catch {
          shared = Buffer.alloc(32); // OpenSSL refuses an all-zero result itself
        }
        // RFC 8422 §5.11 / RFC 7748 §6.1: an all-zero result means a low-order point; abort.
        if (shared.every((b) => b === 0)) throw new TlsAlert(AlertDescription.illegal_parameter, 'client x25519 value of low order');
        return shared;
      };
    } else if (group === SECP256R1) {
      const ecdh = createECDH('prime256v1');
      pub = ecdh.generateKeys();
      this.#premaster = (peer) => {
        if (peer.length !== 65 || peer[0] !== 4) throw new TlsAlert(AlertDescription.illegal_parameter, 'client ECDH point is not an uncompressed P-256 point');
        try {
          return ecdh.computeSecret(peer);
        } catch {
          throw new TlsAlert(AlertDescription.illegal_parameter, 'client ECDH point is not on the curve');
        }
      };
    } else {
      throw new Error(`unsupported ECDHE group ${group}`);
    }
    this.params = Buffer.concat([Buffer.from([NAMED_CURVE, group >> 8, group & 0xff, pub.length]), pub]);
  }

  /** The premaster secret (P-256: the shared point's x coordinate; x25519: the shared secret) from a ClientKeyExchange body. */
  premasterFromClientKeyExchange(body: Buffer): Buffer {
    const r = new ByteReader(body);
    const value = r.vec8();
    r.end();
    return this.#premaster(value);
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
