/**
 * RFC 6347 §4.1.2.6 anti-replay: a 64-entry sliding window over the 48-bit record sequence numbers of one epoch.
 * The window is two 32-bit words of plain numbers (48-bit sequence numbers are exact in a double): no allocation
 * per record, 16 bytes of state. The words are kept signed (`| 0`), so V8 stores them in the object as small
 * integers rather than as heap numbers of their own (an idle session holds one window).
 */

const WINDOW = 64;

export class ReplayWindow {
  /** Highest sequence number accepted so far, -1 before the first. */
  #top = -1;
  /** Bit i of (hi:lo) set ⇔ sequence number (top - i) was accepted. */
  #lo = 0;
  #hi = 0;

  /** The window as three numbers (highest accepted, then the two bit words), for session-state.ts. */
  snapshot(): [number, number, number] {
    return [this.#top, this.#lo >>> 0, this.#hi >>> 0];
  }

  /** A window from snapshot(). */
  static restore([top, lo, hi]: readonly [number, number, number]): ReplayWindow {
    const w = new ReplayWindow();
    w.#top = top;
    w.#lo = lo | 0;
    w.#hi = hi | 0;
    return w;
  }

  /** True when `seq` is neither too old nor already seen. Does not change the window (call accept after the MAC check). */
  check(seq: number): boolean {
    if (seq > this.#top) return true;
    const diff = this.#top - seq;
    if (diff >= WINDOW) return false;
    return (diff < 32 ? (this.#lo >>> diff) & 1 : (this.#hi >>> (diff - 32)) & 1) === 0;
  }

  /** True when `seq` is above every sequence number accepted so far. */
  isNewest(seq: number): boolean {
    return seq > this.#top;
  }

  /** Marks `seq` as received, shifting the window when it is the new highest. */
  accept(seq: number): void {
    if (seq > this.#top) {
      const shift = seq - this.#top;
      if (shift >= WINDOW) {
        this.#hi = 0;
        this.#lo = 0;
      } else if (shift >= 32) {
        this.#hi = this.#lo << (shift - 32);
        this.#lo = 0;
      } else {
        this.#hi = (this.#hi << shift) | (this.#lo >>> (32 - shift));
        this.#lo = this.#lo << shift;
      }
      this.#lo |= 1;
      this.#top = seq;
    } else {
      const diff = this.#top - seq;
      if (diff < 32) this.#lo |= 1 << diff;
      else if (diff < WINDOW) this.#hi |= 1 << (diff - 32);
    }
  }
}
