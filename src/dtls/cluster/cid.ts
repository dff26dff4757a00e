/**
 * The CIDs a cluster node issues: its node id in the first byte, random bytes after it, SERVER_CID_LENGTH in all, so
 * any node reads the owner of a tls12_cid record from its header without state. The CID reveals which node holds the
 * session and nothing more: the other seven bytes are random.
 */
import { randomBytes } from 'node:crypto';
import { SERVER_CID_LENGTH } from '../cid.ts';

/** Node ids are 0 … MAX_NODES - 1: one byte of the CID. */
export const MAX_NODES = 256;

/** A fresh CID naming `nodeId`. */
export function nodeCid(nodeId: number): Buffer {
  const cid = randomBytes(SERVER_CID_LENGTH);
  cid[0] = nodeId;
  return cid;
}

/** The CID of a datagram's first record, when it is a tls12_cid record: after type, version, epoch and sequence number. */
export function recordCid(datagram: Buffer): Buffer {
  return datagram.subarray(11, 11 + SERVER_CID_LENGTH);
}

/** The node a CID this cluster issued names. */
export function cidNode(cid: Buffer): number {
  return cid[0];
}
