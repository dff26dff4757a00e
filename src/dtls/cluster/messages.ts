/**
 * The datagrams between cluster nodes, on DTLS_CLUSTER_PORT. Each carries one or more messages of two kinds:
 *
 *   forward  the node a device's tls12_cid record arrived at → the node its CID names: the device's datagram and the
 *            address:port it came from (as the receiving node saw it)
 *   answer   that node → the receiving node: a datagram to send to the device at address:port from the socket the
 *            device's datagram arrived on (behind a balancer, the only way back to the device)
 *
 * Layout: magic (1) ‖ sender node id (1) ‖ sent at, ms since the epoch (6) ‖ message ‖ message ‖ … ‖ tag (16:
 * HMAC-SHA256 of everything before it, with a key derived from SECRET_KEY), each message: kind (1) ‖ port (2) ‖
 * address length (1) ‖ address (ASCII) ‖ datagram length (2) ‖ datagram.
 *
 * A node coalesces the messages bound for one peer within one turn of its event loop (under load, within a window of
 * `batchWindowMs`) into one datagram of at most `batchBytes` (a message too large for that goes alone): one send, one
 * receive and one tag for the lot, the price of forwarding being those per-datagram costs (docs/fleet.md#cid-routing).
 *
 * A node of the version before batches (magic 0xd7) knows one message per datagram only: magic (1) ‖ kind (1) ‖ sender
 * node id (1) ‖ sent at (6) ‖ port (2) ‖ address length (1) ‖ address ‖ datagram ‖ tag (16). Nodes that take batches
 * say so in the node directory (registry.ts); a peer that does not is sent that format, one message a datagram, and
 * it is read from any peer, so a rolling deploy across the two versions keeps forwarding (sealSingle, openMessages).
 *
 * The tag is what lets a node act on an address it did not see itself: without the key nobody can make a node
 * process a device's record as coming from a forged address, or make it send a datagram anywhere. A datagram is taken
 * whole or not at all: its tag, its freshness and the bounds of every message in it are checked before the first
 * message is acted on. One sent more than MAX_AGE_MS ago (or that far in the future: the nodes' clocks are assumed to
 * be NTP-close) is refused, so a captured datagram is only good for a short replay, and a replayed forward carries
 * DTLS records the sessions' replay windows refuse anyway.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

/** Batches; a node of the version before refuses them rather than misread them, and is sent SINGLE instead. */
const MAGIC = 0xd8;
/** One message a datagram, the format of the version before batches. */
const SINGLE = 0xd7;
const SINGLE_HEADER = 12;
const TAG = 16;
const HEADER = 8;
/** kind, port, address length, datagram length */
const MESSAGE_FIXED = 6;
/** A message older (or newer) than this is refused. */
export const MAX_AGE_MS = 30_000;
/** Under a common path MTU (1,500 less the IPv6 and UDP headers, with room to spare): no IP fragmentation. */
export const DEFAULT_BATCH_BYTES = 1400;
/** How long a batch waits for more under load: Node's timers count whole milliseconds, so 1 is the least above none. */
export const DEFAULT_BATCH_WINDOW_MS = 1;

export const MessageKind = { forward: 1, answer: 2 } as const;
export type MessageKind = (typeof MessageKind)[keyof typeof MessageKind];

export interface ClusterMessage {
  kind: MessageKind;
  /** the device's address and port */
  address: string;
  port: number;
  /** the device's datagram (forward) or the datagram for the device (answer) */
  datagram: Buffer;
}

/** Called for each message of an authentic datagram, in order; `datagram` is a view into the received datagram. */
export type MessageVisitor = (kind: MessageKind, node: number, address: string, port: number, datagram: Buffer) => void;

/** The bytes one message takes in a batch. */
export function messageBytes(address: string, datagram: Buffer): number {
  return MESSAGE_FIXED + address.length + datagram.length;
}

/** The bytes of a datagram holding messages of `bytes` in all. */
export function datagramBytes(bytes: number): number {
  return HEADER + bytes + TAG;
}

/**
 * The messages bound for one peer, written straight into the datagram that will carry them (no object per message).
 * `seal` writes the time and the tag and hands the datagram over; the batch then starts empty in a fresh buffer.
 */
export class Batch {
  /** allocated at the first message (from Node's buffer pool below 4 KiB) */
  #b: Buffer | null = null;
  #end = HEADER;
  #count = 0;

  readonly capacity: number;

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  /** Messages in the batch. */
  get count(): number {
    return this.#count;
  }

  /** True when a message of `bytes` (messageBytes) still fits. */
  fits(bytes: number): boolean {
    return this.#end + bytes + TAG <= this.capacity;
  }

  /** Appends a message; the caller checked that it fits. */
  add(kind: MessageKind, address: string, port: number, datagram: Buffer): void {
    const b = (this.#b ??= Buffer.allocUnsafe(this.capacity));
    let at = this.#end;
    b[at] = kind;
    b.writeUInt16BE(port, at + 1);
    b[at + 3] = address.length;
    b.write(address, at + 4, 'latin1');
    at += 4 + address.length;
    b.writeUInt16BE(datagram.length, at);
    datagram.copy(b, at + 2);
    this.#end = at + 2 + datagram.length;
    this.#count++;
  }

  /** The sealed datagram (of at least one message) from node `node`; the batch is empty again. */
  seal(key: KeyObject, node: number, now = Date.now()): Buffer {
    const b = this.#b!;
    b[0] = MAGIC;
    b[1] = node;
    b.writeUIntBE(now, 2, 6);
    const bodyEnd = this.#end;
    tag(key, b.subarray(0, bodyEnd)).copy(b, bodyEnd);
    this.#b = null; // the sealed one is the socket's until it is sent
    this.#end = HEADER;
    this.#count = 0;
    return b.subarray(0, bodyEnd + TAG);
  }
}

/** One datagram carrying `messages` from node `node` (as Batch does, sized to fit them). */
export function sealMessages(key: KeyObject, node: number, messages: readonly ClusterMessage[], now = Date.now()): Buffer {
  const batch = new Batch(datagramBytes(messages.reduce((n, m) => n + messageBytes(m.address, m.datagram), 0)));
  for (const m of messages) batch.add(m.kind, m.address, m.port, m.datagram);
  return batch.seal(key, node, now);
}

/** One message in a datagram of its own, in the format of the version before batches (for a peer of that version). */
export function sealSingle(key: KeyObject, node: number, m: ClusterMessage, now = Date.now()): Buffer {
  const bodyEnd = SINGLE_HEADER + m.address.length + m.datagram.length;
  const out = Buffer.allocUnsafe(bodyEnd + TAG);
  out[0] = SINGLE;
  out[1] = m.kind;
  out[2] = node;
  out.writeUIntBE(now, 3, 6);
  out.writeUInt16BE(m.port, 9);
  out[11] = m.address.length;
  out.write(m.address, SINGLE_HEADER, 'latin1');
  m.datagram.copy(out, SINGLE_HEADER + m.address.length);
  tag(key, out.subarray(0, bodyEnd)).copy(out, bodyEnd);
  return out;
}

function openSingle(key: KeyObject, b: Buffer, visit: MessageVisitor, now: number): number | null {
  if (b.length < SINGLE_HEADER + TAG) return null;
  const bodyEnd = b.length - TAG;
  const addressEnd = SINGLE_HEADER + b[11];
  if (addressEnd > bodyEnd) return null;
  if (!timingSafeEqual(tag(key, b.subarray(0, bodyEnd)), b.subarray(bodyEnd))) return null;
  if (Math.abs(now - b.readUIntBE(3, 6)) > MAX_AGE_MS) return null;
  const kind = b[1];
  if (kind !== MessageKind.forward && kind !== MessageKind.answer) return null;
  visit(kind, b[2], b.toString('latin1', SINGLE_HEADER, addressEnd), b.readUInt16BE(9), b.subarray(addressEnd, bodyEnd));
  return 1;
}

/**
 * Visits the messages of an inter-node datagram (a batch, or a single message of the version before), in order, and
 * returns how many there were; null, having visited none, when it is malformed (a length past its end included), not
 * authentic or not fresh.
 */
export function openMessages(key: KeyObject, b: Buffer, visit: MessageVisitor, now = Date.now()): number | null {
  if (b[0] === SINGLE) return openSingle(key, b, visit, now);
  if (b.length < HEADER + TAG || b[0] !== MAGIC) return null;
  const bodyEnd = b.length - TAG;
  if (!timingSafeEqual(tag(key, b.subarray(0, bodyEnd)), b.subarray(bodyEnd))) return null;
  if (Math.abs(now - b.readUIntBE(2, 6)) > MAX_AGE_MS) return null;
  // every bound before any message is acted on: a datagram is taken whole or not at all
  let count = 0;
  for (let at = HEADER; at < bodyEnd; count++) {
    if (at + MESSAGE_FIXED > bodyEnd) return null;
    const kind = b[at];
    if (kind !== MessageKind.forward && kind !== MessageKind.answer) return null;
    const datagramAt = at + 4 + b[at + 3];
    if (datagramAt + 2 > bodyEnd) return null;
    at = datagramAt + 2 + b.readUInt16BE(datagramAt);
    if (at > bodyEnd) return null;
  }
  if (count === 0) return null;
  const node = b[1];
  for (let at = HEADER; at < bodyEnd;) {
    const addressEnd = at + 4 + b[at + 3];
    const datagramEnd = addressEnd + 2 + b.readUInt16BE(addressEnd);
    visit(b[at] as MessageKind, node, b.toString('latin1', at + 4, addressEnd), b.readUInt16BE(at + 1), b.subarray(addressEnd + 2, datagramEnd));
    at = datagramEnd;
  }
  return count;
}

function tag(key: KeyObject, body: Buffer): Buffer {
  return createHmac('sha256', key).update(body).digest().subarray(0, TAG);
}
