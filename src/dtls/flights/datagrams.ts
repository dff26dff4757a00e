/**
 * A flight on the wire: its handshake messages fragmented, sealed and packed into datagrams of at most `mtu` bytes.
 * The handshaker sends (and retransmits) its flights through it, and so does an established session asked for
 * flight 6 again.
 */
import type { CipherSuite } from '../../tls/suites/index.ts';
import { HANDSHAKE_HEADER_LENGTH, fragmentMessage } from '../handshake.ts';
import type { HandshakeMessage } from '../handshake.ts';
import { ContentType, RECORD_HEADER_LENGTH } from '../record.ts';
import type { RecordLayer } from '../record.ts';

/** One flight: `plain` handshake messages in epoch 0, then, when `encrypted` is not empty, a CCS and those in epoch 1. */
export interface Flight {
  plain: HandshakeMessage[];
  encrypted: HandshakeMessage[];
}

const CCS = Buffer.from([1]);

/** The flight's records (each sealed now, with the next sequence numbers) packed into datagrams of at most `mtu` bytes. */
export function flightDatagrams(flight: Flight, records: RecordLayer, suite: CipherSuite, mtu: number): Buffer[] {
  const datagrams: Buffer[] = [];
  let current: Buffer[] = [];
  let size = 0;
  const add = (record: Buffer): void => {
    if (size + record.length > mtu && current.length > 0) {
      datagrams.push(Buffer.concat(current));
      current = [];
      size = 0;
    }
    current.push(record);
    size += record.length;
  };
  const header = RECORD_HEADER_LENGTH + HANDSHAKE_HEADER_LENGTH;
  for (const msg of flight.plain) {
    for (const frag of fragmentMessage(msg, mtu - header)) add(records.seal(0, ContentType.handshake, frag));
  }
  if (flight.encrypted.length > 0) {
    add(records.seal(0, ContentType.change_cipher_spec, CCS));
    for (const msg of flight.encrypted) {
      for (const frag of fragmentMessage(msg, mtu - header - suite.maxOverhead - records.cidOverhead(1))) add(records.seal(1, ContentType.handshake, frag));
    }
  }
  if (current.length > 0) datagrams.push(Buffer.concat(current));
  return datagrams;
}
