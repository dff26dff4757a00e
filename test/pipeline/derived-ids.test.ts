import { describe, expect, it } from 'vitest';
import { derivedHashId } from '../../src/pipeline/process-device-job.ts';

// A retried job (or one run again by another version of the service during an upgrade) must derive the same report,
// measurement and activity ids, or what it stored the first time is stored twice: the derivation is pinned here.
describe('derivedHashId', () => {
  it('derives the ids of sha256(jobId:label), 12 characters with a letter first', () => {
    expect(derivedHashId('q3v8k2m1x9p0z7r4:0', 'activity')).toBe('i49q6jgmwujn');
    expect(derivedHashId('q3v8k2m1x9p0z7r4:0', 'call:0')).toBe('l262c6hkz8bv');
    expect(derivedHashId('abc', 'm0')).toBe('gdexby44x1fo');
  });

  it('differs per label and per job', () => {
    const ids = new Set<string>();
    for (let j = 0; j < 50; j++) for (const label of ['activity', 'call:0', 'call:1', 'report', 'm0', 'm1']) ids.add(derivedHashId(`job${j}`, label));
    expect(ids.size).toBe(300);
    for (const id of ids) expect(id).toMatch(/^[a-z][a-z0-9]{11}$/);
  });
});
