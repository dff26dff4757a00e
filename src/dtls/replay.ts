/** RFC 6347 §4.1.2.6 anti-replay: a 64-entry sliding window over the 48-bit record sequence numbers of one epoch. */

const WINDOW = 64n;

export class ReplayWindow {
  /** Highest sequence number accepted so far, -1 before the first. */
  #top = -1n;
  /** Bit i set ⇔ sequence number (top - i) was accepted. */
  #bits = 0n;

  /** True when `seq` is neither too old nor already seen. Does not change the window (call accept after the MAC check). */
  check(seq: number): boolean {
    const s = BigInt(seq);
    if (s > this.#top) return true;
    const diff = this.#top - s;
    if (diff >= WINDOW) return false;
    return ((this.#bits >> diff) & 1n) === 0n;
  }

  /** True when `seq` is above every sequence number accepted so far. */
  isNewest(seq: number): boolean {
    return BigInt(seq) > this.#top;
  }

  /** Marks `seq` as received, shifting the window when it is the new highest. */
  accept(seq: number): void {
    const s = BigInt(seq);
    if (s > this.#top) {
      const shift = s - this.#top;
      this.#bits = shift >= WINDOW ? 1n : ((this.#bits << shift) | 1n) & ((1n << WINDOW) - 1n);
      this.#top = s;
    } else {
      const diff = this.#top - s;
      if (diff < WINDOW) this.#bits |= 1n << diff;
    }
  }
}
