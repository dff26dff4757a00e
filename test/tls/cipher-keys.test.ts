/**
 * A record protection holds its cipher key as a KeyObject only while it is among the last KEPT_KEY_HOLDERS to use
 * one: a gateway's idle sessions carry their key bytes, not two KeyObjects each, and still protect records when they
 * wake up. Counted on the live heap (v8.queryObjects collects garbage first).
 */
import { KeyObject, randomBytes } from 'node:crypto';
import { queryObjects } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { AeadProtection } from '../../src/tls/suites/aead.ts';
import { KEPT_KEY_HOLDERS } from '../../src/tls/suites/cipher-keys.ts';

const liveKeyObjects = () => queryObjects(KeyObject, { format: 'count' });
const seq = (n: number) => Buffer.from([0, 1, 0, 0, 0, 0, 0, n]);

describe('cipher keys of record protections', () => {
  it('at most KEPT_KEY_HOLDERS protections hold a KeyObject, however many have protected a record', () => {
    const before = liveKeyObjects();
    const protections = Array.from({ length: 2 * KEPT_KEY_HOLDERS }, () => new AeadProtection('aes-128-ccm', 8, randomBytes(16), randomBytes(4)));
    for (const p of protections) p.seal(seq(1), 23, 0xfefd, Buffer.from('report'), 13);
    expect(protections).toHaveLength(2 * KEPT_KEY_HOLDERS); // all of them still referenced here
    expect(liveKeyObjects() - before).toBeLessThanOrEqual(KEPT_KEY_HOLDERS);
  });

  it('a protection that dropped its KeyObject seals and opens records with the same key as before', () => {
    const key = randomBytes(16);
    const iv = randomBytes(4);
    const write = new AeadProtection('aes-128-ccm', 8, key, iv);
    const read = new AeadProtection('aes-128-ccm', 8, key, iv);
    const early = write.seal(seq(1), 23, 0xfefd, Buffer.from('before'), 13);
    expect(read.open(seq(1), 23, 0xfefd, early.subarray(13)).toString()).toBe('before');
    // others use their keys meanwhile: these two are the oldest holders and drop theirs
    for (let i = 0; i < KEPT_KEY_HOLDERS; i++)
      new AeadProtection('aes-128-gcm', 16, randomBytes(16), randomBytes(4)).seal(seq(2), 23, 0xfefd, Buffer.from('x'), 13);
    const late = write.seal(seq(3), 23, 0xfefd, Buffer.from('after'), 13);
    expect(read.open(seq(3), 23, 0xfefd, late.subarray(13)).toString()).toBe('after');
    expect(read.open(seq(1), 23, 0xfefd, early.subarray(13)).toString()).toBe('before');
  });
});
