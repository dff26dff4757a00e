/** Connection ID primitives (RFC 9146) with fixed vectors: additional data, tls12_cid record sealing and parsing. */
import { describe, expect, it } from 'vitest';
import { createCipheriv, createHmac } from 'node:crypto';
import { CidAeadProtection, CidCbcSha256Protection, cidAdditionalData, encodeConnectionIdExtension, parseConnectionIdExtension } from '../../src/dtls/cid.ts';
import { RecordLayer, parseDatagram } from '../../src/dtls/record.ts';
import { TLS_PSK_WITH_AES_128_CCM_8 } from '../../src/tls/suites/index.ts';

const KEY = Buffer.from('000102030405060708090a0b0c0d0e0f', 'hex');
const IV = Buffer.from('a0a1a2a3', 'hex');
const CID = Buffer.from('aabbccdd', 'hex');
/**
 * Epoch 1, seq 5, CID aabbccdd, application data "hi" under AES-128-CCM_8 (key 00..0f, IV a0a1a2a3). Computed by
 * test/support/cid-client (the independent implementation) and fixed here.
 */
const RECORD = '19fefd0001000000000005aabbccdd00130001000000000005449419cf48f91558535e7c';

describe('RFC 9146 primitives', () => {
  it('additional data: 8 × ff ‖ 25 ‖ cid_length ‖ 25 ‖ version ‖ epoch ‖ seq ‖ cid ‖ inner length', () => {
    expect(cidAdditionalData(0xfefd, 1, 5, CID, 3).toString('hex')).toBe('ffffffffffffffff190419fefd0001000000000005aabbccdd0003');
  });

  it('seals a tls12_cid record to the fixed vector and opens it back to the inner type and content', () => {
    const w = new RecordLayer();
    for (let i = 0; i < 5; i++) w.seal(0, 22, Buffer.alloc(0)); // (epoch 0 numbering does not touch epoch 1)
    const prot = TLS_PSK_WITH_AES_128_CCM_8.createProtection(Buffer.alloc(0), KEY, IV);
    w.installWriteEpoch(1, prot, { cid: CID, protection: new CidAeadProtection(0xc0a8, KEY, IV) });
    for (let i = 0; i < 5; i++) w.seal(1, 23, Buffer.from('skip'));
    expect(w.seal(1, 23, Buffer.from('hi')).toString('hex')).toBe(RECORD);

    const [rec] = parseDatagram(Buffer.from(RECORD, 'hex'), 4);
    expect(rec).toMatchObject({ type: 25, epoch: 1, seq: 5, cid: CID });
    const r = new RecordLayer();
    r.installReadEpoch(1, prot, { cid: CID, protection: new CidAeadProtection(0xc0a8, KEY, IV) });
    expect(r.open(rec)).toEqual(Buffer.from('hi'));
    expect(rec.type).toBe(23);
    expect(r.lastOpenedWasNewest).toBe(true);
  });

  it('drops tls12_cid records with another CID, a flipped bit, or in an epoch without a CID; and plain records where a CID is due', () => {
    const prot = () => TLS_PSK_WITH_AES_128_CCM_8.createProtection(Buffer.alloc(0), KEY, IV);
    const withCid = new RecordLayer();
    withCid.installReadEpoch(1, prot(), { cid: CID, protection: new CidAeadProtection(0xc0a8, KEY, IV) });
    const other = Buffer.from(RECORD, 'hex');
    other[11] ^= 0xff;
    expect(withCid.open(parseDatagram(other, 4)[0])).toBe('drop');
    const flipped = Buffer.from(RECORD, 'hex');
    flipped[flipped.length - 3] ^= 1;
    expect(withCid.open(parseDatagram(flipped, 4)[0])).toBe('bad_mac');
    expect(withCid.open({ type: 23, version: 0xfefd, epoch: 1, seq: 9, fragment: Buffer.alloc(30) })).toBe('drop');
    const noCid = new RecordLayer();
    noCid.installReadEpoch(1, prot());
    expect(noCid.open(parseDatagram(Buffer.from(RECORD, 'hex'), 4)[0])).toBe('drop');
  });

  it('parses tls12_cid headers only when a CID length is known; keeps plain records around them', () => {
    const plain = Buffer.from('17fefd00010000000000060003616263', 'hex');
    const d = Buffer.concat([plain, Buffer.from(RECORD, 'hex')]);
    expect(parseDatagram(d, 4).map((r) => r.type)).toEqual([23, 25]);
    expect(parseDatagram(d).map((r) => r.type)).toEqual([23]);
  });

  it('connection_id extension codec', () => {
    expect(encodeConnectionIdExtension(CID).toString('hex')).toBe('04aabbccdd');
    expect(parseConnectionIdExtension(Buffer.from('00', 'hex'))).toHaveLength(0);
    expect(() => parseConnectionIdExtension(Buffer.from('05aabb', 'hex'))).toThrow(/connection_id/);
  });

  it('CBC-SHA256 (RFC 9146 §5.1): HMAC over the CID additional data ‖ inner plaintext, then IV ‖ CBC(inner ‖ MAC ‖ padding)', () => {
    const macKey = Buffer.alloc(32, 0x11);
    const encKey = Buffer.alloc(16, 0x22);
    const iv = Buffer.alloc(16, 0x33);
    // Built here step by step from the RFC text, independently of src/dtls/cid.ts.
    const inner = Buffer.from('hi\x17\x00\x00', 'latin1'); // content, real type 23, two bytes of zero padding
    const aad = Buffer.from('ffffffffffffffff190419fefd0001000000000005aabbccdd0005', 'hex');
    const mac = createHmac('sha256', macKey).update(aad).update(inner).digest();
    const padLen = 16 - 1 - ((inner.length + 32) % 16);
    const c = createCipheriv('aes-128-cbc', encKey, iv).setAutoPadding(false);
    const body = Buffer.concat([iv, c.update(Buffer.concat([inner, mac, Buffer.alloc(padLen + 1, padLen)])), c.final()]);
    const p = new CidCbcSha256Protection(macKey, encKey);
    expect(p.open(0xfefd, 1, 5, CID, body)).toEqual({ type: 23, content: Buffer.from('hi') });
    const wrongSeq = () => p.open(0xfefd, 1, 6, CID, body);
    expect(wrongSeq).toThrow(expect.objectContaining({ description: 20 }));
    const bent = Buffer.from(body);
    bent[20] ^= 1;
    expect(() => p.open(0xfefd, 1, 5, CID, bent)).toThrow(expect.objectContaining({ description: 20 }));
    // and what it seals, it opens (random IV, so no fixed vector)
    for (const len of [0, 1, 14, 15, 16, 100]) {
      const content = Buffer.alloc(len, 7);
      const sealed = p.seal(0xfefd, 2, 9, CID, 22, content, 0);
      expect(p.open(0xfefd, 2, 9, CID, sealed)).toEqual({ type: 22, content });
      expect(sealed.length - len).toBeLessThanOrEqual(p.overhead);
    }
  });
});
