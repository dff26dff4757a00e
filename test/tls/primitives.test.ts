import { describe, expect, it } from 'vitest';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { prf, pskPreMasterSecret, verifyData, masterSecret, extendedMasterSecret, keyExpansion, splitKeyBlock } from '../../src/tls/prf.ts';
import { AeadProtection } from '../../src/tls/suites/aead.ts';
import { CIPHER_SUITES, keyBlockLength } from '../../src/tls/suites/index.ts';
import { TlsAlert, AlertDescription } from '../../src/tls/alert.ts';
import {
  checkClientHelloOffer,
  encodeClientHello,
  encodeHandshake,
  expectType,
  parseClientHello,
  parseClientKeyExchangePsk,
  encodeClientKeyExchangePsk,
  encodeServerHello,
  parseServerHello,
} from '../../src/tls/messages.ts';
import { HandshakeReassembler, RecordReader, encodePlaintextRecord } from '../../src/tls/record.ts';

const hex = (s: string) => Buffer.from(s.replace(/[\s:]/g, ''), 'hex');

describe('TLS 1.2 PRF (P_SHA256)', () => {
  const secret = hex('9b be 43 6b a9 40 f0 17 b1 76 52 84 9a 71 db 35');
  const seed = hex('a0 ba 9f 93 6c da 31 18 27 a6 f7 96 ff d5 19 8c');
  // Published IETF TLS WG vector; full 100 bytes cross-checked with `openssl kdf ... TLS1-PRF` (OpenSSL 3.0.19).
  const expected = hex(`
    e3 f2 29 ba 72 7b e1 7b 8d 12 26 20 55 7c d4 53 c2 aa b2 1d 07 c3 d4 95 32 9b 52 d4 e6 1e db 5a
    6b 30 17 91 e9 0d 35 c9 c9 a4 6b 4e 14 ba f9 af 0f a0 22 f7 07 7d ef 17 ab fd 37 97 c0 56 4b ab
    4f bc 91 66 6e 9d ef 9b 97 fc e3 4f 79 67 89 ba a4 80 82 d1 22 ee 42 c5 a7 2e 5a 51 10 ff f7 01
    87 34 7b 66`);

  it('matches the published 100-byte vector', () => {
    expect(prf(secret, 'test label', seed, 100).toString('hex')).toBe(expected.toString('hex'));
  });

  it('matches openssl TLS1-PRF for other lengths', () => {
    for (const len of [12, 48, 72, 104]) {
      let out: string;
      try {
        out = execFileSync(
          'openssl',
          [
            'kdf',
            '-keylen',
            String(len),
            '-kdfopt',
            'digest:SHA256',
            '-kdfopt',
            `hexsecret:${secret.toString('hex')}`,
            '-kdfopt',
            `hexseed:${Buffer.concat([Buffer.from('key expansion'), seed]).toString('hex')}`,
            'TLS1-PRF',
          ],
          { encoding: 'utf8' },
        );
      } catch (err) {
        throw new Error(`openssl kdf (OpenSSL ≥ 3) is needed for this vector: ${(err as Error).message}`, { cause: err });
      }
      expect(prf(secret, 'key expansion', seed, len).toString('hex')).toBe(out.trim().replace(/:/g, '').toLowerCase());
    }
  });

  it('key expansion: the key block is PRF(master, "key expansion", server_random ‖ client_random), split client-first (RFC 5246 §6.3)', () => {
    const master = hex(
      '0c 8b 24 19 6d d1 a9 77 4d 1a 68 07 91 4c 0c 1b 2f 6e 7c 1e 0b 91 38 34 69 66 17 3e 67 fc 2f 5b 30 4a 33 3a f4 ad e2 a6 2e 28 6e 5f 0e 47 4e 41',
    );
    const clientRandom = Buffer.alloc(32, 0xc1);
    const serverRandom = Buffer.alloc(32, 0x5e);
    // independent computation: OpenSSL's TLS1-PRF over the RFC's seed order (server random first)
    const openssl = execFileSync(
      'openssl',
      [
        'kdf',
        '-keylen',
        '40',
        '-kdfopt',
        'digest:SHA256',
        '-kdfopt',
        `hexsecret:${master.toString('hex')}`,
        '-kdfopt',
        `hexseed:${Buffer.concat([Buffer.from('key expansion'), serverRandom, clientRandom]).toString('hex')}`,
        'TLS1-PRF',
      ],
      { encoding: 'utf8' },
    )
      .trim()
      .replace(/:/g, '')
      .toLowerCase();
    const block = keyExpansion(master, serverRandom, clientRandom, 40);
    expect(block.toString('hex')).toBe(openssl);
    // AES-128-CCM_8: no MAC keys, 16-byte keys, 4-byte implicit IVs
    const k = splitKeyBlock(block, 0, 16, 4);
    expect([k.clientKey, k.serverKey, k.clientIv, k.serverIv].map((b) => b.toString('hex'))).toEqual([
      openssl.slice(0, 32),
      openssl.slice(32, 64),
      openssl.slice(64, 72),
      openssl.slice(72, 80),
    ]);
  });

  it('derives master / extended master secret / verify_data with the RFC labels and lengths', () => {
    const pre = pskPreMasterSecret(Buffer.from('0102', 'hex'));
    const cr = Buffer.alloc(32, 1);
    const sr = Buffer.alloc(32, 2);
    expect(masterSecret(pre, cr, sr)).toEqual(prf(pre, 'master secret', Buffer.concat([cr, sr]), 48));
    const h = Buffer.alloc(32, 3);
    expect(extendedMasterSecret(pre, h)).toEqual(prf(pre, 'extended master secret', h, 48));
    expect(verifyData(Buffer.alloc(48), 'client', h)).toEqual(prf(Buffer.alloc(48), 'client finished', h, 12));
  });

  it('builds the RFC 4279 plain-PSK premaster secret', () => {
    expect(pskPreMasterSecret(hex('aabbcc')).toString('hex')).toBe('0003' + '000000' + '0003' + 'aabbcc');
  });
});

describe('AES-CCM-8', () => {
  it("node's aes-128-ccm with an 8-byte tag reproduces RFC 3610 packet vector #1", () => {
    const key = hex('C0C1C2C3C4C5C6C7C8C9CACBCCCDCECF');
    const nonce = hex('00000003020100A0A1A2A3A4A5');
    const aad = hex('0001020304050607');
    const pt = hex('08090A0B0C0D0E0F101112131415161718191A1B1C1D1E');
    const c = createCipheriv('aes-128-ccm', key, nonce, { authTagLength: 8 });
    c.setAAD(aad, { plaintextLength: pt.length });
    const ct = Buffer.concat([c.update(pt), c.final()]);
    expect(ct.toString('hex')).toBe('588c979a61c663d2f066d0c2c0f989806d5f6b61dac384');
    expect(c.getAuthTag().toString('hex')).toBe('17e8d12cfdf926e0');
  });

  it('record protection uses nonce = fixed_iv(4) || seq(8), AAD = seq||type||version||length, 8-byte tag', () => {
    const key = randomBytes(16);
    const iv = randomBytes(4);
    const seq = hex('0000000000000007');
    const pt = Buffer.from('hello ccm');
    const rec = new AeadProtection('aes-128-ccm', 8, key, iv).seal(seq, 23, 0x0303, pt, 5);
    const frag = rec.subarray(5);
    expect(frag.subarray(0, 8)).toEqual(seq); // explicit nonce = sequence number
    expect(frag.length).toBe(8 + pt.length + 8);
    const d = createDecipheriv('aes-128-ccm', key, Buffer.concat([iv, seq]), { authTagLength: 8 });
    d.setAuthTag(frag.subarray(8 + pt.length));
    d.setAAD(Buffer.concat([seq, hex('17 0303'), hex('0009')]), { plaintextLength: pt.length });
    expect(Buffer.concat([d.update(frag.subarray(8, 8 + pt.length)), d.final()]).toString()).toBe('hello ccm');
  });
});

describe('cipher suites', () => {
  it('are in server preference order CCM_8, GCM, CBC-SHA256', () => {
    expect(CIPHER_SUITES.map((s) => [s.name, s.id])).toEqual([
      ['TLS_PSK_WITH_AES_128_CCM_8', 0xc0a8],
      ['TLS_PSK_WITH_AES_128_GCM_SHA256', 0x00a8],
      ['TLS_PSK_WITH_AES_128_CBC_SHA256', 0x00ae],
    ]);
    expect(CIPHER_SUITES.map(keyBlockLength)).toEqual([40, 40, 96]);
  });

  for (const suite of CIPHER_SUITES) {
    describe(suite.name, () => {
      const mk = () => {
        const macKey = randomBytes(suite.macKeyLength);
        const encKey = randomBytes(suite.encKeyLength);
        const iv = randomBytes(suite.fixedIvLength);
        return [suite.createProtection(macKey, encKey, iv), suite.createProtection(macKey, encKey, iv)] as const;
      };
      const seq = hex('0000000000000001');

      it('round-trips records of many lengths', () => {
        const [w, r] = mk();
        for (const len of [0, 1, 15, 16, 17, 31, 32, 33, 100, 1000, 16384]) {
          const pt = randomBytes(len);
          const rec = w.seal(seq, 23, 0x0303, pt, 5);
          expect(rec.length - 5 - len).toBeLessThanOrEqual(suite.maxOverhead);
          expect(r.open(seq, 23, 0x0303, rec.subarray(5))).toEqual(pt);
        }
      });

      it('rejects any bit flip, wrong seq, wrong type, truncation with bad_record_mac', () => {
        const [w, r] = mk();
        const frag = w.seal(seq, 23, 0x0303, Buffer.from('some application data'), 0);
        const expectBadMac = (f: () => unknown) => {
          try {
            f();
          } catch (e) {
            expect(e).toBeInstanceOf(TlsAlert);
            expect((e as TlsAlert).description).toBe(AlertDescription.bad_record_mac);
            return;
          }
          throw new Error('expected bad_record_mac');
        };
        for (let i = 0; i < frag.length; i++) {
          const m = Buffer.from(frag);
          m[i] ^= 0x01;
          expectBadMac(() => r.open(seq, 23, 0x0303, m));
        }
        expectBadMac(() => r.open(hex('0000000000000002'), 23, 0x0303, frag));
        expectBadMac(() => r.open(seq, 22, 0x0303, frag));
        expectBadMac(() => r.open(seq, 23, 0x0303, frag.subarray(0, frag.length - 1)));
        expectBadMac(() => r.open(seq, 23, 0x0303, frag.subarray(0, 4)));
      });
    });
  }

  it('CBC: a bad padding and a bad MAC give the same alert', () => {
    const suite = CIPHER_SUITES[2];
    const macKey = randomBytes(32);
    const encKey = randomBytes(16);
    const p = suite.createProtection(macKey, encKey, Buffer.alloc(0));
    const seq = Buffer.alloc(8);
    // Hand-build a record whose padding bytes are inconsistent but which is otherwise well formed.
    const iv = randomBytes(16);
    const body = Buffer.concat([Buffer.alloc(32 + 15, 7), Buffer.from([3])]); // pad_len=3 but pad bytes are 7
    const c = createCipheriv('aes-128-cbc', encKey, iv).setAutoPadding(false);
    const frag = Buffer.concat([iv, c.update(body), c.final()]);
    let err: unknown;
    try {
      p.open(seq, 23, 0x0303, frag);
    } catch (e) {
      err = e;
    }
    expect((err as TlsAlert).description).toBe(AlertDescription.bad_record_mac);
    expect((err as TlsAlert).message).toBe('bad record MAC');
  });
});

describe('handshake messages', () => {
  const ch = {
    clientVersion: 0x0303,
    random: randomBytes(32),
    sessionId: randomBytes(32),
    cipherSuites: [0xc0a8, 0x00a8, 0x00ff],
    compressionMethods: Buffer.from([0]),
    extensions: [
      { type: 23, data: Buffer.alloc(0) },
      { type: 0x1234, data: Buffer.from('unknown') },
    ],
  };

  it('ClientHello round-trips, incl. extensions', () => {
    const p = parseClientHello(encodeClientHello(ch));
    expect(p.clientVersion).toBe(0x0303);
    expect(p.cipherSuites).toEqual(ch.cipherSuites);
    expect(p.extensions).toEqual(ch.extensions);
    expect(p.sessionId).toEqual(ch.sessionId);
  });

  it('ClientHello without extensions block parses', () => {
    const p = parseClientHello(encodeClientHello({ ...ch, extensions: [] }));
    expect(p.extensions).toEqual([]);
  });

  it('DTLS ClientHello cookie', () => {
    const p = parseClientHello(encodeClientHello({ ...ch, cookie: Buffer.from('cookie') }, { dtls: true }), {
      dtls: true,
    });
    expect(p.cookie?.toString()).toBe('cookie');
  });

  it('every truncation of a ClientHello is a decode_error (except dropping the whole extensions block)', () => {
    const body = encodeClientHello(ch);
    const extBlock = 2 + ch.extensions.reduce((n, e) => n + 4 + e.data.length, 0);
    for (let n = 0; n < body.length; n++) {
      if (n === body.length - extBlock) continue; // a ClientHello without extensions is valid
      expect(() => parseClientHello(body.subarray(0, n))).toThrow(TlsAlert);
    }
  });

  it('duplicate extensions are rejected', () => {
    const body = encodeClientHello({ ...ch, extensions: [ch.extensions[0], ch.extensions[0]] });
    expect(() => parseClientHello(body)).toThrow(/duplicate/);
  });

  it('ServerHello and PSK ClientKeyExchange round-trip', () => {
    const sh = {
      serverVersion: 0x0303,
      random: randomBytes(32),
      sessionId: Buffer.alloc(0),
      cipherSuite: 0xc0a8,
      extensions: [{ type: 0xff01, data: Buffer.from([0]) }],
    };
    expect(parseServerHello(encodeServerHello(sh))).toEqual(sh);
    expect(parseClientKeyExchangePsk(encodeClientKeyExchangePsk(Buffer.from('dev-1'))).toString()).toBe('dev-1');
    expect(() => parseClientKeyExchangePsk(Buffer.from([0, 5, 1]))).toThrow(TlsAlert);
  });
});

describe('ClientHello offer checks (shared by the TLS and DTLS servers)', () => {
  const hello = (o: { suites?: number[]; compression?: number[]; extensions?: { type: number; data: Buffer }[] } = {}) => ({
    clientVersion: 0x0303,
    random: randomBytes(32),
    sessionId: Buffer.alloc(0),
    cipherSuites: o.suites ?? [0xc0a8],
    compressionMethods: Buffer.from(o.compression ?? [0]),
    extensions: o.extensions ?? [],
  });

  it('reports extended_master_secret and secure renegotiation (by extension or by SCSV)', () => {
    expect(checkClientHelloOffer(hello())).toEqual({ extendedMasterSecret: false, secureRenegotiation: false });
    expect(
      checkClientHelloOffer(
        hello({
          extensions: [
            { type: 23, data: Buffer.alloc(0) },
            { type: 0xff01, data: Buffer.from([0]) },
          ],
        }),
      ),
    ).toEqual({ extendedMasterSecret: true, secureRenegotiation: true });
    expect(checkClientHelloOffer(hello({ suites: [0xc0a8, 0x00ff] })).secureRenegotiation).toBe(true);
  });

  it('refuses no null compression, a non-empty renegotiation_info and a non-empty extended_master_secret, each with its alert', () => {
    const alertOf = (ch: ReturnType<typeof hello>) => {
      try {
        checkClientHelloOffer(ch);
        return null;
      } catch (err) {
        return (err as TlsAlert).description;
      }
    };
    expect(alertOf(hello({ compression: [1] }))).toBe(AlertDescription.illegal_parameter);
    expect(alertOf(hello({ extensions: [{ type: 0xff01, data: Buffer.from([1, 7]) }] }))).toBe(AlertDescription.handshake_failure);
    expect(alertOf(hello({ extensions: [{ type: 23, data: Buffer.from([0]) }] }))).toBe(AlertDescription.decode_error);
  });

  it('expectType refuses a handshake message of another type with unexpected_message', () => {
    expect(() => expectType({ type: 16 }, 16)).not.toThrow();
    expect(() => expectType({ type: 20 }, 16)).toThrow(expect.objectContaining({ description: AlertDescription.unexpected_message }));
  });
});

describe('record layer', () => {
  it('parses records split at every byte boundary and several per chunk', () => {
    const recs = [
      encodePlaintextRecord(22, 0x0303, Buffer.from('abc')),
      encodePlaintextRecord(23, 0x0303, Buffer.alloc(0)),
      encodePlaintextRecord(21, 0x0303, Buffer.from([1, 0])),
    ];
    const all = Buffer.concat(recs);
    for (let split = 0; split <= all.length; split++) {
      const r = new RecordReader();
      const got: string[] = [];
      for (const part of [all.subarray(0, split), all.subarray(split)]) {
        r.push(part);
        while (r.next()) got.push(`${r.type}:${r.fragment.toString('hex')}`);
      }
      expect(got).toEqual(['22:616263', '23:', '21:0100']);
    }
  });

  it('enforces record size limits with record_overflow', () => {
    const r = new RecordReader();
    r.push(Buffer.from([23, 3, 3, 0x40, 0x01]));
    expect(() => r.next()).toThrow(expect.objectContaining({ description: AlertDescription.record_overflow }));
    const r2 = new RecordReader();
    r2.maxFragmentLength = 16384 + 2048;
    r2.push(Buffer.from([23, 3, 3, 0x48, 0x01]));
    expect(() => r2.next()).toThrow(expect.objectContaining({ description: AlertDescription.record_overflow }));
  });

  it('rejects bad content types immediately', () => {
    const r = new RecordReader();
    r.push(Buffer.from('G'));
    expect(() => r.next()).toThrow(expect.objectContaining({ description: AlertDescription.unexpected_message }));
  });

  it('reassembles handshake messages fragmented across records and packed several per record', () => {
    const m1 = encodeHandshake(2, Buffer.alloc(70, 1));
    const m2 = encodeHandshake(14, Buffer.alloc(0));
    const m3 = encodeHandshake(20, Buffer.alloc(12, 3));
    const all = Buffer.concat([m1, m2, m3]);
    for (const size of [1, 3, 7, 100, all.length]) {
      const h = new HandshakeReassembler();
      const got: number[] = [];
      for (let o = 0; o < all.length; o += size) {
        h.push(all.subarray(o, o + size));
        for (let m = h.next(); m; m = h.next()) got.push(m.type);
      }
      expect(got).toEqual([2, 14, 20]);
      expect(h.hasPartial).toBe(false);
    }
  });
});
