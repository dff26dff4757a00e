/** ECDHE_ECDSA message codecs with fixed vectors, signatures, and client chain validation (src/tls/ecdhe-ecdsa.ts, x509-chain.ts). */
import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EphemeralEcdhe,
  chooseEcdheGroup,
  encodeCertificate,
  encodeCertificateRequest,
  encodeServerKeyExchange,
  parseCertificate,
  verifyCertificateVerify,
} from '../../src/tls/ecdhe-ecdsa.ts';
import { verifyChain, verifyClientChain } from '../../src/tls/x509-chain.ts';
import { makeTestPki } from './pki.ts';
import type { TestPki } from './pki.ts';

let pki: TestPki;
beforeAll(() => {
  pki = makeTestPki();
});
afterAll(() => pki.remove());

describe('ECDHE_ECDSA codecs', () => {
  it('Certificate: 24-bit list of 24-bit entries, round trip; malformed lists are decode_error', () => {
    const body = encodeCertificate([Buffer.from('0102', 'hex'), Buffer.from('03', 'hex')]);
    expect(body.toString('hex')).toBe('000009' + '0000020102' + '00000103');
    expect(parseCertificate(body)).toEqual([Buffer.from('0102', 'hex'), Buffer.from('03', 'hex')]);
    expect(parseCertificate(Buffer.from('000000', 'hex'))).toEqual([]);
    for (const bad of ['00000a0000020102', '0000040000000a', '000003000001']) {
      expect(() => parseCertificate(Buffer.from(bad, 'hex'))).toThrow(expect.objectContaining({ description: 50 }));
    }
  });

  it('CertificateRequest: ecdsa_sign(64), ecdsa_secp256r1_sha256, no CA names', () => {
    expect(encodeCertificateRequest().toString('hex')).toBe('0140' + '00020403' + '0000');
  });

  it('ServerKeyExchange: named_curve secp256r1 params, 0x0403, DER signature over client_random ‖ server_random ‖ params', () => {
    const e = new EphemeralEcdhe();
    expect(e.params.subarray(0, 5).toString('hex')).toBe('0300174104');
    expect(e.params).toHaveLength(4 + 65);
    const key = createPrivateKey(pki.read('server.key'));
    const cr = Buffer.alloc(32, 1);
    const sr = Buffer.alloc(32, 2);
    const ske = encodeServerKeyExchange(e.params, cr, sr, key);
    expect(ske.subarray(69, 71).toString('hex')).toBe('0403');
    const sig = ske.subarray(73);
    expect(ske.readUInt16BE(71)).toBe(sig.length);
    expect(verify('sha256', Buffer.concat([cr, sr, e.params]), createPublicKey(key), sig)).toBe(true);
    expect(verify('sha256', Buffer.concat([sr, cr, e.params]), createPublicKey(key), sig)).toBe(false);
  });

  it('x25519: params are named_curve 29 with a 32-byte value; both sides agree; low-order values are illegal_parameter', () => {
    const server = new EphemeralEcdhe(29);
    const client = new EphemeralEcdhe(29);
    expect(server.params.subarray(0, 4).toString('hex')).toBe('03001d20');
    expect(server.params).toHaveLength(36);
    const a = server.premasterFromClientKeyExchange(Buffer.concat([Buffer.from([32]), client.params.subarray(4)]));
    expect(a).toEqual(client.premasterFromClientKeyExchange(Buffer.concat([Buffer.from([32]), server.params.subarray(4)])));
    for (const low of [Buffer.alloc(32), Buffer.concat([Buffer.from([1]), Buffer.alloc(31)])]) {
      expect(() => server.premasterFromClientKeyExchange(Buffer.concat([Buffer.from([32]), low]))).toThrow(expect.objectContaining({ description: 47 }));
    }
    expect(() => server.premasterFromClientKeyExchange(Buffer.concat([Buffer.from([31]), Buffer.alloc(31, 9)]))).toThrow(
      expect.objectContaining({ description: 47 }),
    );
  });

  it('ECDH: both sides derive the same premaster; points off the curve or compressed are illegal_parameter', () => {
    const server = new EphemeralEcdhe();
    const client = new EphemeralEcdhe();
    const clientPoint = client.params.subarray(4);
    const cke = Buffer.concat([Buffer.from([65]), clientPoint]);
    const a = server.premasterFromClientKeyExchange(cke);
    const b = client.premasterFromClientKeyExchange(Buffer.concat([Buffer.from([65]), server.params.subarray(4)]));
    expect(a).toEqual(b);
    expect(a).toHaveLength(32);
    const offCurve = Buffer.from(cke);
    offCurve[40] ^= 1;
    expect(() => server.premasterFromClientKeyExchange(offCurve)).toThrow(expect.objectContaining({ description: 47 }));
    expect(() => server.premasterFromClientKeyExchange(Buffer.concat([Buffer.from([33, 2]), Buffer.alloc(32)]))).toThrow(
      expect.objectContaining({ description: 47 }),
    );
  });

  it('CertificateVerify: right key passes; wrong key or bytes → decrypt_error; other algorithm → illegal_parameter', () => {
    const msgs = Buffer.from('the handshake so far');
    const sig = sign('sha256', msgs, createPrivateKey(pki.read('device.key')));
    const body = Buffer.concat([Buffer.from([4, 3, sig.length >> 8, sig.length & 0xff]), sig]);
    const pub = pki.cert('device').publicKey;
    expect(() => verifyCertificateVerify(body, msgs, pub)).not.toThrow();
    expect(() => verifyCertificateVerify(body, Buffer.from('other'), pub)).toThrow(expect.objectContaining({ description: 51 }));
    expect(() => verifyCertificateVerify(body, msgs, pki.cert('stranger').publicKey)).toThrow(expect.objectContaining({ description: 51 }));
    const rsa = Buffer.from(body);
    rsa[0] = 8;
    rsa[1] = 4;
    expect(() => verifyCertificateVerify(rsa, msgs, pub)).toThrow(expect.objectContaining({ description: 47 }));
  });

  it('group choice: x25519 when offered, else secp256r1; uncompressed points and ECDSA-SHA256 required (absent extensions allow them)', () => {
    const ext = (type: number, hex: string) => ({ type, data: Buffer.from(hex, 'hex') });
    expect(chooseEcdheGroup([])).toBe(23);
    expect(chooseEcdheGroup([ext(10, '00040017001d'), ext(11, '0100'), ext(13, '000408040403')])).toBe(29);
    expect(chooseEcdheGroup([ext(10, '000400180017')])).toBe(23); // secp384r1, secp256r1
    expect(chooseEcdheGroup([ext(10, '00020018')])).toBeUndefined(); // secp384r1 only
    expect(chooseEcdheGroup([ext(11, '0101')])).toBeUndefined(); // compressed only
    expect(chooseEcdheGroup([ext(13, '00020804')])).toBeUndefined(); // RSA-PSS only
  });
});

describe('client chain validation', () => {
  const der = (...names: string[]): Buffer[] => names.map((n) => pki.cert(n).raw);

  it('accepts a device an anchor signed, with or without the anchor sent after it', () => {
    expect(verifyClientChain(der('device'), [pki.cert('ca')]).map((c) => c.subject)).toEqual(['CN=device-cert-1']);
    expect(verifyClientChain(der('device2', 'inter'), [pki.cert('ca'), pki.cert('inter')])).toHaveLength(2);
    expect(verifyClientChain(der('device2'), [pki.cert('inter')])).toHaveLength(1); // the supplier CA itself as anchor
  });

  it("refuses: not signed directly by an anchor (unknown_ca), expired (certificate_expired), a CA or server certificate as the device's (unsupported_certificate), one signed by two anchors alike (access_denied), nothing sent", () => {
    const code = (f: () => unknown): number | undefined => {
      try {
        f();
        return undefined;
      } catch (e) {
        return (e as { description?: number }).description;
      }
    };
    expect(code(() => verifyClientChain(der('device2'), [pki.cert('ca')]))).toBe(48);
    expect(code(() => verifyClientChain(der('device2', 'inter'), [pki.cert('ca')]))).toBe(48); // a sent intermediate is no anchor
    expect(code(() => verifyClientChain(der('device3', 'sub'), [pki.cert('ca'), pki.cert('inter')]))).toBe(48); // below pathlen 0
    expect(code(() => verifyClientChain(der('stranger'), [pki.cert('ca')]))).toBe(48);
    expect(code(() => verifyClientChain(der('device'), []))).toBe(48);
    expect(code(() => verifyClientChain(der('expired'), [pki.cert('ca')]))).toBe(45);
    expect(code(() => verifyClientChain(der('minted', 'device'), [pki.cert('ca')]))).toBe(48); // its issuer is no anchor (nor a CA)
    expect(code(() => verifyClientChain(der('inter', 'device2'), [pki.cert('ca')]))).toBe(43);
    expect(code(() => verifyClientChain(der('ca-device'), [pki.cert('ca')]))).toBe(43);
    expect(code(() => verifyClientChain(der('server-only'), [pki.cert('ca')]))).toBe(43);
    expect(code(() => verifyClientChain(der('device'), [pki.cert('ca'), pki.cert('ca')]))).toBe(49);
    expect(code(() => verifyClientChain([], [pki.cert('ca')]))).toBe(40);
    expect(code(() => verifyClientChain([Buffer.from('not a certificate')], [pki.cert('ca')]))).toBe(42);
  });

  it('checks validity against the time given (the anchor included)', () => {
    const chain = [pki.cert('device')];
    expect(() => verifyChain(chain, [pki.cert('ca')])).not.toThrow();
    expect(() => verifyChain(chain, [pki.cert('ca')], Date.now() + 10 * 86_400_000)).toThrow(expect.objectContaining({ description: 45 }));
    expect(() => verifyChain(chain, [pki.cert('ca')], Date.now() - 86_400_000)).toThrow(expect.objectContaining({ description: 45 }));
  });
});
