import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { createPskTlsServer } from '../../src/tls/index.ts';
import { encodeClientHello, encodeHandshake } from '../../src/tls/messages.ts';
import { HandshakeReassembler, MAX_HANDSHAKE_MESSAGE_LENGTH, RecordReader, StreamBuffer, encodePlaintextRecord } from '../../src/tls/record.ts';
import { TestClient, portOf } from './helpers.ts';

/** CPU time (user + system, µs) this process spends pushing `n` 1-byte fragments of one n-byte message. */
function cpuForOneByteFragments(n: number): number {
  const message = encodeHandshake(1, randomBytes(n - 4));
  const h = new HandshakeReassembler(n);
  const t0 = process.cpuUsage();
  let got = 0;
  for (let i = 0; i < n; i++) {
    h.push(message.subarray(i, i + 1));
    if (h.next()) got++;
  }
  const used = process.cpuUsage(t0);
  expect(got).toBe(1);
  return used.user + used.system;
}

/** Best of several runs: the least disturbed by other processes' cache pressure and by GC. */
function bestOf(runs: number, n: number): number {
  let best = Infinity;
  for (let i = 0; i < runs; i++) best = Math.min(best, cpuForOneByteFragments(n));
  return best;
}

describe('handshake reassembly', () => {
  it('costs CPU linear in the bytes of a message sent in 1-byte records (4x the bytes, well under 8x the time)', () => {
    cpuForOneByteFragments(16_000); // warm-up (JIT)
    const small = bestOf(5, 16_000);
    const large = bestOf(5, 64_000);
    // linear: about 4; the quadratic re-concatenation this replaces: about 16
    expect(large / Math.max(small, 1)).toBeLessThan(8);
  });

  it('returns a message fragmented at every byte intact, and one inside a single fragment as a view of it', () => {
    const m1 = encodeHandshake(1, randomBytes(300));
    const m2 = encodeHandshake(16, randomBytes(20));
    const h = new HandshakeReassembler();
    for (let i = 0; i < m1.length; i++) {
      h.push(m1.subarray(i, i + 1));
      const m = h.next();
      if (i < m1.length - 1) expect(m).toBeNull();
      else expect(m?.raw.equals(m1)).toBe(true);
    }
    h.push(m2);
    expect(h.next()?.raw.buffer).toBe(m2.buffer);
    expect(h.hasPartial).toBe(false);
  });
});

/** CPU time (µs) the record reader spends on `count` records of `size` bytes, each arriving one byte per read. */
function cpuForRecordsByteByByte(count: number, size: number): number {
  const stream = Buffer.concat(Array.from({ length: count }, () => encodePlaintextRecord(23, 0x0303, randomBytes(size))));
  const r = new RecordReader();
  let got = 0;
  const t0 = process.cpuUsage();
  for (let i = 0; i < stream.length; i++) {
    r.push(stream.subarray(i, i + 1));
    while (r.next()) got++;
  }
  const used = process.cpuUsage(t0);
  expect(got).toBe(count);
  return used.user + used.system;
}

describe('record reassembly', () => {
  it('costs the same CPU per byte for large records as for small ones when they arrive one byte per read', () => {
    cpuForRecordsByteByByte(16, 1024); // warm-up (JIT)
    let small = Infinity;
    let large = Infinity;
    for (let i = 0; i < 5; i++) {
      small = Math.min(small, cpuForRecordsByteByByte(64, 1024));
      large = Math.min(large, cpuForRecordsByteByByte(4, 16_384));
    }
    // the same 64 KiB either way: linear gives about 1; copying the pending record on every read gives about 16
    expect(large / Math.max(small, 1)).toBeLessThan(3);
  });
});

/** CPU time (µs) gathering `n` bytes that arrive one per read, as the device port does with a first record. */
function cpuForGatheringByteByByte(n: number): number {
  const bytes = randomBytes(n);
  const b = new StreamBuffer();
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    b.push(bytes.subarray(i, i + 1));
    if (b.pending.length !== i + 1) throw new Error('lost a byte');
  }
  const used = process.cpuUsage(t0);
  expect(b.pending.equals(bytes)).toBe(true);
  return used.user + used.system;
}

describe('stream buffer', () => {
  it('costs CPU linear in the bytes gathered when they arrive one per read (4x the bytes, well under 8x the time)', () => {
    cpuForGatheringByteByByte(16_000); // warm-up (JIT)
    let small = Infinity;
    let large = Infinity;
    for (let i = 0; i < 5; i++) {
      small = Math.min(small, cpuForGatheringByteByByte(16_000));
      large = Math.min(large, cpuForGatheringByteByByte(64_000));
    }
    expect(large / Math.max(small, 1)).toBeLessThan(8);
  });

  it('keeps views of pending bytes valid while more arrive and some are consumed', () => {
    const b = new StreamBuffer();
    b.push(Buffer.from('ab'));
    b.push(Buffer.from('cd'));
    const view = b.pending;
    b.consume(1);
    b.push(Buffer.from('efgh'));
    expect(view.toString()).toBe('abcd');
    expect(b.pending.toString()).toBe('bcdefgh');
    b.consume(7);
    expect(b.length).toBe(0);
  });
});

describe('a ClientHello announced larger than the cap', () => {
  let server: net.Server;
  let port: number;
  const clients: TestClient[] = [];
  const connect = async () => {
    const c = await TestClient.connect(port);
    clients.push(c);
    return c;
  };
  beforeAll(async () => {
    // a long handshake timeout: only the cap can end these connections within the test
    server = createPskTlsServer({ lookupPsk: async () => null, handshakeTimeoutMs: 600_000 });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = portOf(server);
  });
  afterAll(async () => {
    for (const c of clients) c.socket.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  function pskClientHelloHead(announced: number): Buffer {
    const body = encodeClientHello({
      clientVersion: 0x0303,
      random: randomBytes(32),
      sessionId: Buffer.alloc(0),
      cipherSuites: [0xc0a8, 0x00ff],
      compressionMethods: Buffer.from([0]),
      extensions: [],
    });
    const head = Buffer.alloc(4);
    head[0] = 1;
    head.writeUIntBE(announced, 1, 3);
    return Buffer.concat([head, body]);
  }

  it(`is refused with a fatal alert as soon as its header arrives (${MAX_HANDSHAKE_MESSAGE_LENGTH + 1} bytes and more)`, async () => {
    for (const announced of [MAX_HANDSHAKE_MESSAGE_LENGTH + 1, 65_532]) {
      const c = await connect();
      // the first record looks like a PSK ClientHello; the rest would follow in 1-byte records
      c.socket.write(encodePlaintextRecord(22, 0x0301, pskClientHelloHead(announced)));
      const rec = await c.recv();
      expect(rec.type).toBe(21);
      expect([...rec.data]).toEqual([2, 40]);
      await c.waitClose();
    }
  });

  it('one just under the cap, sent in 1-byte records, is still read to its end', async () => {
    const c = await connect();
    const hello = pskClientHelloHead(MAX_HANDSHAKE_MESSAGE_LENGTH);
    const padded = Buffer.concat([hello, Buffer.alloc(MAX_HANDSHAKE_MESSAGE_LENGTH + 4 - hello.length)]);
    // the padding is not a valid extension block, so the parsed ClientHello is refused with decode_error
    c.socket.write(Buffer.concat(Array.from(padded, (b) => encodePlaintextRecord(22, 0x0303, Buffer.from([b])))));
    const rec = await c.recv();
    expect(rec.type).toBe(21);
    expect([...rec.data]).toEqual([2, 50]);
    await c.waitClose();
  });
});
