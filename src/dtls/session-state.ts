/**
 * An established session as bytes, so another process (after a restart, or another node) can carry it on
 * (session-store.ts keeps it, sealed). Two parts, because they change at different times:
 *
 *   keys    fixed at the handshake: suite, EMS flag, the epoch-1 key block, session id, both Connection IDs, and who
 *           the peer is (PSK identity, or the verified certificate chain as DER)
 *   motion  what moves with every record: the next write sequence number, the receive replay window, where the peer
 *           is, when it was last heard, and what the application above attached (CoAP: the device, its next message id)
 *
 * Nonces: a restored session must never seal a sequence number a process sealed before. Sequence numbers are leased
 * from the store in WRITE_LEASE blocks (an atomic increment of the key's `p` field), renewed in the background when
 * half of a lease is used: a process that dies leaves at most one lease unused, the next load starts after it, and
 * two nodes loading the same state at once get different leases. A graceful hand-over (DtlsServer.suspend) writes the
 * exact next number, so the next process continues without a gap.
 */
import { X509Certificate } from 'node:crypto';
import { splitKeyBlock } from '../tls/prf.ts';
import type { CipherSuite, RecordProtection } from '../tls/suites/index.ts';
import { createCidProtection } from './cid.ts';
import type { EpochCid } from './record.ts';
import type { CachedSession } from './session-cache.ts';

/**
 * Sequence numbers leased at a time. A lease is the largest jump a device sees after its gateway was killed, and
 * some DTLS stacks drop records more than 64 ahead of the newest they had (node-dtls-client), hence less than 64.
 */
export const WRITE_LEASE = 48;

const VERSION = 1;
const EMPTY = Buffer.alloc(0);

export interface SessionKeys {
  suiteId: number;
  extendedMasterSecret: boolean;
  /** The key_block of RFC 5246 §6.3 for the suite (client and server keys, MAC keys and IVs). */
  keyBlock: Buffer;
  sessionId: Buffer;
  connectionId?: Buffer;
  peerConnectionId?: Buffer;
  pskIdentity?: string;
  /** DER, device certificate first; empty for PSK sessions. */
  peerCertificates: Buffer[];
}

export interface SessionMotion {
  /** The next epoch-1 sequence number the server seals. */
  writeSeq: number;
  /** ReplayWindow.snapshot() of epoch 1. */
  replay: [number, number, number];
  remoteAddress: string;
  remotePort: number;
  /** When the last authentic record arrived (ms since the epoch). */
  lastActive: number;
  /** Opaque bytes of the application above (empty when none). */
  attachment: Buffer;
}

/** Epoch-1 protections from a key block; a direction with a CID gets only its CID protection (an idle session holds less). */
export function epoch1Protections(
  suite: CipherSuite,
  keyBlock: Buffer,
  connectionId: Buffer | undefined,
  peerConnectionId: Buffer | undefined,
): {
  read: RecordProtection | null;
  readCid?: EpochCid;
  write: RecordProtection | undefined;
  writeCid?: EpochCid;
} {
  const k = splitKeyBlock(keyBlock, suite.macKeyLength, suite.encKeyLength, suite.fixedIvLength);
  const readCid = connectionId ? { cid: connectionId, protection: createCidProtection(suite, k.clientMacKey, k.clientKey, k.clientIv) } : undefined;
  const writeCid =
    peerConnectionId && peerConnectionId.length > 0
      ? { cid: peerConnectionId, protection: createCidProtection(suite, k.serverMacKey, k.serverKey, k.serverIv) }
      : undefined;
  return {
    read: readCid ? null : suite.createProtection(k.clientMacKey, k.clientKey, k.clientIv),
    write: writeCid ? undefined : suite.createProtection(k.serverMacKey, k.serverKey, k.serverIv),
    ...(readCid ? { readCid } : {}),
    ...(writeCid ? { writeCid } : {}),
  };
}

/** Appends length-prefixed fields into one buffer. */
class Writer {
  readonly parts: Buffer[] = [];
  u8(v: number): this {
    this.parts.push(Buffer.of(v));
    return this;
  }
  u16(v: number): this {
    const b = Buffer.allocUnsafe(2);
    b.writeUInt16BE(v);
    this.parts.push(b);
    return this;
  }
  u32(v: number): this {
    const b = Buffer.allocUnsafe(4);
    b.writeUInt32BE(v >>> 0);
    this.parts.push(b);
    return this;
  }
  u48(v: number): this {
    const b = Buffer.allocUnsafe(6);
    b.writeUIntBE(v, 0, 6);
    this.parts.push(b);
    return this;
  }
  bytes8(b: Buffer): this {
    if (b.length > 0xff) throw new Error('field longer than 255 bytes');
    return this.u8(b.length).raw(b);
  }
  bytes16(b: Buffer): this {
    if (b.length > 0xffff) throw new Error('field longer than 65535 bytes');
    return this.u16(b.length).raw(b);
  }
  bytes32(b: Buffer): this {
    return this.u32(b.length).raw(b);
  }
  raw(b: Buffer): this {
    this.parts.push(b);
    return this;
  }
  done(): Buffer {
    return Buffer.concat(this.parts);
  }
}

/** Reads what Writer wrote; any overrun throws (a state that does not parse is not used). */
class Reader {
  #o = 0;
  readonly #b: Buffer;
  constructor(b: Buffer) {
    this.#b = b;
  }
  #take(n: number): number {
    const o = this.#o;
    if (o + n > this.#b.length) throw new Error('truncated session state');
    this.#o += n;
    return o;
  }
  u8(): number {
    return this.#b[this.#take(1)];
  }
  u16(): number {
    return this.#b.readUInt16BE(this.#take(2));
  }
  u32(): number {
    return this.#b.readUInt32BE(this.#take(4));
  }
  u48(): number {
    return this.#b.readUIntBE(this.#take(6), 6);
  }
  bytes(n: number): Buffer {
    const o = this.#take(n);
    return Buffer.from(this.#b.subarray(o, o + n)); // its own memory: kept for the session's life
  }
  bytes8(): Buffer {
    return this.bytes(this.u8());
  }
  bytes16(): Buffer {
    return this.bytes(this.u16());
  }
  bytes32(): Buffer {
    return this.bytes(this.u32());
  }
  end(): void {
    if (this.#o !== this.#b.length) throw new Error('trailing bytes in session state');
  }
}

const FLAG_EMS = 1;
const FLAG_CID = 2;
const FLAG_PEER_CID = 4;
const FLAG_PSK = 8;

export function encodeKeys(k: SessionKeys): Buffer {
  const flags =
    (k.extendedMasterSecret ? FLAG_EMS : 0) |
    (k.connectionId ? FLAG_CID : 0) |
    (k.peerConnectionId ? FLAG_PEER_CID : 0) |
    (k.pskIdentity !== undefined ? FLAG_PSK : 0);
  const w = new Writer().u8(VERSION).u16(k.suiteId).u8(flags).bytes8(k.keyBlock).bytes8(k.sessionId);
  if (k.connectionId) w.bytes8(k.connectionId);
  if (k.peerConnectionId) w.bytes8(k.peerConnectionId);
  if (k.pskIdentity !== undefined) w.bytes16(Buffer.from(k.pskIdentity, 'utf8'));
  w.u8(k.peerCertificates.length);
  for (const der of k.peerCertificates) w.bytes32(der);
  return w.done();
}

export function decodeKeys(b: Buffer): SessionKeys {
  const r = new Reader(b);
  if (r.u8() !== VERSION) throw new Error('unknown session state version');
  const suiteId = r.u16();
  const flags = r.u8();
  const k: SessionKeys = { suiteId, extendedMasterSecret: (flags & FLAG_EMS) !== 0, keyBlock: r.bytes8(), sessionId: r.bytes8(), peerCertificates: [] };
  if (flags & FLAG_CID) k.connectionId = r.bytes8();
  if (flags & FLAG_PEER_CID) k.peerConnectionId = r.bytes8();
  if (flags & FLAG_PSK) k.pskIdentity = r.bytes16().toString('utf8');
  const n = r.u8();
  for (let i = 0; i < n; i++) k.peerCertificates.push(r.bytes32());
  r.end();
  return k;
}

export function encodeMotion(m: SessionMotion): Buffer {
  // the replay window's top is -1 before the first record: stored one higher
  return new Writer()
    .u8(VERSION)
    .u48(m.writeSeq)
    .u48(m.replay[0] + 1)
    .u32(m.replay[1])
    .u32(m.replay[2])
    .bytes8(Buffer.from(m.remoteAddress, 'utf8'))
    .u16(m.remotePort)
    .u48(m.lastActive)
    .bytes16(m.attachment)
    .done();
}

export function decodeMotion(b: Buffer): SessionMotion {
  const r = new Reader(b);
  if (r.u8() !== VERSION) throw new Error('unknown session state version');
  const m: SessionMotion = {
    writeSeq: r.u48(),
    replay: [r.u48() - 1, r.u32(), r.u32()],
    remoteAddress: r.bytes8().toString('utf8'),
    remotePort: r.u16(),
    lastActive: r.u48(),
    attachment: r.bytes16(),
  };
  r.end();
  return m;
}

/** The certificate chain of a kept session as objects again. */
export function certificatesFromDer(ders: Buffer[]): X509Certificate[] {
  return ders.map((d) => new X509Certificate(d));
}

/** A resumption cache entry (session-cache.ts) as bytes, for the cache the gateway nodes share. */
export function encodeCached(c: CachedSession): Buffer {
  const w = new Writer()
    .u8(VERSION)
    .u16(c.suiteId)
    .u8(c.extendedMasterSecret ? FLAG_EMS : 0)
    .bytes8(c.masterSecret)
    .u48(c.expiresAt);
  w.bytes8(c.pskHash ?? EMPTY);
  w.bytes16(Buffer.from(c.pskIdentity ?? '', 'utf8')).u8(c.pskIdentity === undefined ? 0 : 1);
  w.u8(c.peerCertificates.length);
  for (const cert of c.peerCertificates) w.bytes32(cert.raw);
  return w.done();
}

export function decodeCached(b: Buffer): CachedSession {
  const r = new Reader(b);
  if (r.u8() !== VERSION) throw new Error('unknown session state version');
  const c: CachedSession = {
    suiteId: r.u16(),
    extendedMasterSecret: (r.u8() & FLAG_EMS) !== 0,
    masterSecret: r.bytes8(),
    expiresAt: r.u48(),
    peerCertificates: [],
  };
  const pskHash = r.bytes8();
  const identity = r.bytes16().toString('utf8');
  if (r.u8() === 1) c.pskIdentity = identity;
  if (pskHash.length > 0) c.pskHash = pskHash;
  const n = r.u8();
  const ders: Buffer[] = [];
  for (let i = 0; i < n; i++) ders.push(r.bytes32());
  c.peerCertificates = certificatesFromDer(ders);
  r.end();
  return c;
}
