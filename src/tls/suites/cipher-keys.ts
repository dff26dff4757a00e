/**
 * Cipher keys as KeyObjects only while their connection is in use. createCipheriv with a KeyObject costs about a
 * quarter of what it costs with raw key bytes (3.8 against 15 us per record here), so the record path keeps one; but
 * a KeyObject costs about 180 bytes of heap and as much native memory, a session has one per direction, and a
 * gateway's sessions are idle nearly all the time. So a protection keeps its key as 16 or 32 latin1 characters and
 * makes the KeyObject when a record needs it (0.7 us); the last KEPT_KEY_HOLDERS holders to make one keep theirs, and
 * the one made longest ago is dropped when another is made. A holder that stays busy makes its key again once per
 * KEPT_KEY_HOLDERS makings at most.
 */
import { createSecretKey } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

/** How many protections keep a KeyObject: two per session, so 512 sessions exchanging records at the same time. */
export const KEPT_KEY_HOLDERS = 1024;

/** A protection whose KeyObjects can be dropped and made again from its key bytes. */
export interface KeyHolder {
  dropKeys(): void;
}

const holders: Array<KeyHolder | undefined> = new Array<KeyHolder | undefined>(KEPT_KEY_HOLDERS);
let next = 0;

/** A KeyObject of `latin1` key bytes for `holder`, which keeps it until KEPT_KEY_HOLDERS other holders have made one. */
export function makeKey(holder: KeyHolder, latin1: string): KeyObject {
  const key = createSecretKey(Buffer.from(latin1, 'latin1'));
  const evicted = holders[next];
  if (evicted !== holder) evicted?.dropKeys();
  holders[next] = holder;
  next = (next + 1) % KEPT_KEY_HOLDERS;
  return key;
}
