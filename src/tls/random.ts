/**
 * Public random values (ServerHello random, session ids) taken from a pool the CSPRNG refills 4 KiB at a time:
 * a randomBytes call costs ~5 µs whatever its size, and a handshake needs two 32-byte values. Each byte is handed
 * out once; a refill allocates a new pool, so slices handed out earlier never change. A slice keeps its pool alive:
 * callers that keep one for long copy it (the DTLS session does so when it sheds its handshake state). Not for
 * secrets: the unused rest of the pool sits in memory until it is used.
 */
import { randomFillSync } from 'node:crypto';

const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let used = 0;

export function publicRandomBytes(n: number): Buffer {
  if (n > POOL_SIZE / 8) return randomFillSync(Buffer.alloc(n));
  if (used + n > pool.length) {
    pool = randomFillSync(Buffer.allocUnsafeSlow(POOL_SIZE));
    used = 0;
  }
  const out = pool.subarray(used, used + n);
  used += n;
  return out;
}
