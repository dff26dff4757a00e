/**
 * The datagrams between cluster nodes, on DTLS_CLUSTER_PORT:
 *
 *   forward  the node a device's tls12_cid record arrived at → the node its CID names: the device's datagram and the
 *            address:port it came from (as the receiving node saw it)
 *   answer   that node → the receiving node: a datagram to send to the device at address:port from the socket the
 *            device's datagram arrived on (behind a balancer, the only way back to the device)
 *
 * Layout: magic (1) ‖ kind (1) ‖ sender node id (1) ‖ sent at, ms since the epoch (6) ‖ port (2) ‖ address length (1)
 * ‖ address (ASCII) ‖ datagram ‖ tag (16: HMAC-SHA256 of everything before it, with a key derived from SECRET_KEY).
 *
 * The tag is what lets a node act on an address it did not see itself: without the key nobody can make a node
 * process a device's record as coming from a forged address, or make it send a datagram anywhere. A message sent
 * more than MAX_AGE_MS ago (or that far in the future: the nodes' clocks are assumed to be NTP-close) is refused, so
 * a captured message is only good for a short replay, and a replayed forward carries a DTLS record the session's
 * replay window refuses anyway.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

const MAGIC = 0xd7;
const TAG = 16;
const HEADER = 12;
/** A message older (or newer) than this is refused. */
export const MAX_AGE_MS = 30_000;

export const MessageKind = { forward: 1, answer: 2 } as const;
export type MessageKind = (typeof MessageKind)[keyof typeof MessageKind];

export interface ClusterMessage {
  kind: MessageKind;
  /** the node that sent the message */
  node: number;
  /** the device's address and port */
  address: string;
  port: number;
  /** the device's datagram (forward) or the datagram for the device (answer) */
  datagram: Buffer;
}

export function sealMessage(key: KeyObject, m: ClusterMessage, now = Date.now()): Buffer {
  const addressLength = Buffer.byteLength(m.address, 'latin1');
  const bodyEnd = HEADER + addressLength + m.datagram.length;
  const out = Buffer.allocUnsafe(bodyEnd + TAG);
  out[0] = MAGIC;
  out[1] = m.kind;
  out[2] = m.node;
  out.writeUIntBE(now, 3, 6);
  out.writeUInt16BE(m.port, 9);
  out[11] = addressLength;
  out.write(m.address, HEADER, 'latin1');
  m.datagram.copy(out, HEADER + addressLength);
  tag(key, out.subarray(0, bodyEnd)).copy(out, bodyEnd);
  return out;
}

/** The message, or null when it is malformed, not authentic or not fresh. */
export function openMessage(key: KeyObject, b: Buffer, now = Date.now()): ClusterMessage | null {
  if (b.length < HEADER + TAG || b[0] !== MAGIC) return null;
  const bodyEnd = b.length - TAG;
  const addressEnd = HEADER + b[11];
  if (addressEnd > bodyEnd) return null;
  if (!timingSafeEqual(tag(key, b.subarray(0, bodyEnd)), b.subarray(bodyEnd))) return null;
  if (Math.abs(now - b.readUIntBE(3, 6)) > MAX_AGE_MS) return null;
  const kind = b[1];
  if (kind !== MessageKind.forward && kind !== MessageKind.answer) return null;
  return { kind, node: b[2], port: b.readUInt16BE(9), address: b.toString('latin1', HEADER, addressEnd), datagram: b.subarray(addressEnd, bodyEnd) };
}

function tag(key: KeyObject, body: Buffer): Buffer {
  return createHmac('sha256', key).update(body).digest().subarray(0, TAG);
}
