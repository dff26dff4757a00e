/** DTLS building blocks alone: record framing, anti-replay, cookies, handshake fragmentation and reassembly. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CookieSecrets } from '../../src/dtls/cookie.ts';
import { HandshakeReassembler, fragmentMessage, parseHandshakeFragments, transcriptBytes } from '../../src/dtls/handshake.ts';
import { DTLS12, RecordLayer, encodeRecord, parseDatagram, sequenceInput } from '../../src/dtls/record.ts';
import { ReplayWindow } from '../../src/dtls/replay.ts';
import type { ClientHello } from '../../src/tls/messages.ts';
import { TLS_PSK_WITH_AES_128_CCM_8 } from '../../src/tls/suites/index.ts';

describe('DTLS record header', () => {
  it('round-trips type, version, epoch, 48-bit sequence number and fragment; several records per datagram', () => {
    const a = { type: 22, version: DTLS12, epoch: 0, seq: 5, fragment: Buffer.from('first') };
    const b = { type: 23, version: DTLS12, epoch: 1, seq: 2 ** 48 - 1, fragment: Buffer.from('second record') };
    const datagram = Buffer.concat([encodeRecord(a), encodeRecord(b)]);
    expect(datagram.subarray(0, 13).toString('hex')).toBe('16fefd00000000000000050005');
    expect(parseDatagram(datagram)).toEqual([a, b]);
  });

  it('keeps the records before a truncated or malformed one and drops the rest', () => {
    const a = encodeRecord({ type: 22, version: DTLS12, epoch: 0, seq: 1, fragment: Buffer.from('ok') });
    const b = encodeRecord({ type: 23, version: DTLS12, epoch: 1, seq: 2, fragment: Buffer.from('cut off') });
    expect(parseDatagram(Buffer.concat([a, b.subarray(0, b.length - 1)]))).toHaveLength(1);
    expect(parseDatagram(Buffer.concat([a, Buffer.from([99]), b]))).toHaveLength(1);
  });

  it('puts epoch ‖ seq into the 8-byte MAC/AAD sequence input', () => {
    expect(sequenceInput(1, 0x0102030405).toString('hex')).toBe('0001000102030405');
  });

  it('drops records with a bad MAC, an unknown epoch or a replayed sequence number', () => {
    const key = randomBytes(16);
    const iv = randomBytes(4);
    const writer = new RecordLayer();
    writer.installWriteEpoch(1, TLS_PSK_WITH_AES_128_CCM_8.createProtection(Buffer.alloc(0), key, iv));
    const reader = new RecordLayer();
    const sealed = writer.seal(1, 23, Buffer.from('data'));
    const [rec] = parseDatagram(sealed);
    expect(reader.open(rec)).toBe('drop'); // no epoch 1 keys yet
    reader.installReadEpoch(1, TLS_PSK_WITH_AES_128_CCM_8.createProtection(Buffer.alloc(0), key, iv));
    const tampered = Buffer.from(sealed);
    tampered[tampered.length - 1] ^= 1;
    expect(reader.open(parseDatagram(tampered)[0])).toBe('bad_mac');
    expect(reader.open(rec)).toEqual(Buffer.from('data'));
    expect(reader.open(rec)).toBe('drop'); // replay
  });
});

describe('anti-replay window', () => {
  it('accepts fresh numbers, rejects duplicates and numbers 64 or more behind, and shifts', () => {
    const w = new ReplayWindow();
    expect(w.check(0)).toBe(true);
    w.accept(0);
    expect(w.check(0)).toBe(false); // duplicate
    w.accept(10);
    expect(w.check(5)).toBe(true); // inside the window, not yet seen
    w.accept(5);
    expect(w.check(5)).toBe(false);
    w.accept(100); // window now covers 37..100
    expect(w.check(36)).toBe(false); // too old
    expect(w.check(37)).toBe(true);
    expect(w.check(100)).toBe(false);
    expect(w.check(99)).toBe(true);
    w.accept(101); // shift by one keeps 100 marked
    expect(w.check(100)).toBe(false);
    expect(w.check(2 ** 48 - 1)).toBe(true);
  });

  it('agrees with a set-based model over 20 000 random accepts and checks (shifts across both 32-bit words)', () => {
    const w = new ReplayWindow();
    const seen = new Set<number>();
    let top = -1;
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const model = (seq: number) => seq > top || (top - seq < 64 && !seen.has(seq));
    for (let i = 0; i < 20_000; i++) {
      const seq = Math.max(0, top + rand(80) - 66 + (rand(10) === 0 ? rand(200) : 0));
      expect(w.check(seq)).toBe(model(seq));
      if (model(seq)) {
        w.accept(seq);
        seen.add(seq);
        top = Math.max(top, seq);
      }
    }
    expect(top).toBeGreaterThan(1000);
  });
});

describe('stateless cookie', () => {
  const hello = (): ClientHello => ({
    clientVersion: DTLS12,
    random: randomBytes(32),
    sessionId: Buffer.alloc(0),
    cipherSuites: [0xc0a8, 0x00a8],
    compressionMethods: Buffer.from([0]),
    extensions: [],
  });

  it('is valid for the same address, port and ClientHello fields only', () => {
    const secrets = new CookieSecrets();
    const ch = hello();
    ch.cookie = secrets.make('192.0.2.1', 5684, ch);
    expect(secrets.verify('192.0.2.1', 5684, ch)).toBe(true);
    expect(secrets.verify('192.0.2.2', 5684, ch)).toBe(false);
    expect(secrets.verify('192.0.2.1', 5685, ch)).toBe(false);
    expect(secrets.verify('192.0.2.1', 5684, { ...ch, random: randomBytes(32) })).toBe(false);
    expect(secrets.verify('192.0.2.1', 5684, { ...ch, cookie: undefined })).toBe(false);
  });

  it('survives one secret rotation, not two', () => {
    const secrets = new CookieSecrets();
    const ch = hello();
    ch.cookie = secrets.make('192.0.2.1', 5684, ch);
    secrets.rotate();
    expect(secrets.verify('192.0.2.1', 5684, ch)).toBe(true);
    secrets.rotate();
    expect(secrets.verify('192.0.2.1', 5684, ch)).toBe(false);
  });
});

describe('handshake fragmentation and reassembly', () => {
  it('reassembles messages from shuffled, duplicated and overlapping fragments, in message_seq order', () => {
    const m1 = { type: 1, messageSeq: 1, body: randomBytes(500) };
    const m2 = { type: 16, messageSeq: 2, body: randomBytes(37) };
    const frags = [...fragmentMessage(m1, 60), ...fragmentMessage(m2, 10), ...fragmentMessage(m1, 130)];
    // deterministic shuffle, then duplicates
    const shuffled = frags
      .map((f, i) => ({ f, k: (i * 7919) % 31 }))
      .sort((a, b) => a.k - b.k)
      .map((x) => x.f);
    const r = new HandshakeReassembler(1);
    const got = [];
    for (const f of [...shuffled, ...shuffled.slice(0, 5)]) {
      for (const frag of parseHandshakeFragments(f)) r.push(frag);
      for (let m = r.next(); m; m = r.next()) got.push(m);
    }
    expect(got).toEqual([m1, m2]);
    expect(r.push(parseHandshakeFragments(frags[0])[0])).toBe('old');
  });

  it('the transcript form is the unfragmented message with fragment_offset 0 and fragment_length = length', () => {
    const m = { type: 20, messageSeq: 3, body: Buffer.alloc(12, 7) };
    expect(transcriptBytes(m).subarray(0, 12).toString('hex')).toBe('14' + '00000c' + '0003' + '000000' + '00000c');
  });

  it('rejects a fragment that claims to reach past its message', () => {
    const f = fragmentMessage({ type: 1, messageSeq: 0, body: Buffer.alloc(20) }, 100)[0];
    f.writeUIntBE(15, 6, 3); // offset 15 + 20 > 20
    expect(() => parseHandshakeFragments(f)).toThrow();
  });
});
