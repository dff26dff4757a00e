/**
 * The write lease of a kept session (session-state.ts explains why): epoch-1 records are sealed only below the end of
 * the lease the keeper gave, renewed when half of it is used; application data that finds the lease used up waits for
 * the renewal, in order, and more than a lease's worth waiting ends the session (the store is not keeping up). Also
 * what moves with every record, which a renewal writes out.
 */
import { MAX_SEQUENCE } from './record.ts';
import type { RecordLayer } from './record.ts';
import { WRITE_LEASE } from './session-state.ts';
import type { SessionMotion } from './session-state.ts';

const EMPTY = Buffer.alloc(0);
const NONE: Buffer[] = [];

/** The lease is used up (a session without one never is): the next record waits for the renewal. */
export function leaseUsedUp(records: RecordLayer): boolean {
  return records.writeRoom() <= 0 && records.writeLimit <= MAX_SEQUENCE;
}

/** Half of the lease is used: time to ask for the next one. */
export function leaseRunningOut(records: RecordLayer): boolean {
  return records.writeRoom() <= WRITE_LEASE / 2;
}

/** Keeps `data` (copied) behind what waits already; false when more than a lease's worth waits. */
export function holdForLease(held: Buffer[], data: Buffer): boolean {
  held.push(Buffer.from(data));
  return held.length <= WRITE_LEASE;
}

/** A renewed lease ends at `limit`: the records layer seals up to it, and what waited (if anything) is handed back to send. */
export function renewLease(records: RecordLayer, limit: number, held: Buffer[] | undefined): Buffer[] {
  records.setWriteLimit(limit);
  return held ?? NONE;
}

/** What moves with every record, for session-state.ts (`lastActive` in ms since the epoch; `attachment`: the application's bytes). */
export function sessionMotion(
  records: RecordLayer,
  peer: { remoteAddress: string; remotePort: number },
  lastActive: number,
  attachment: Buffer = EMPTY,
): SessionMotion {
  const { writeSeq, replay } = records.epoch1State();
  return { writeSeq, replay, remoteAddress: peer.remoteAddress, remotePort: peer.remotePort, lastActive, attachment };
}
