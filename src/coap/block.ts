/**
 * Block-wise transfers (RFC 7959): the Block1/Block2 option value, reassembly of an upload (Block1) and the slices
 * of a large answer (Block2).
 */
import type { Clock, ClockTimer } from '../app/clock.ts';
import { SYSTEM_CLOCK } from './config.ts';
import { decodeUint, encodeUint } from './message.ts';

export interface BlockOption {
  num: number;
  more: boolean;
  /** block size exponent: size = 2 ** (szx + 4); 7 (BERT) is for reliable transports only */
  szx: number;
}

export const blockSize = (szx: number) => 2 ** (szx + 4);

export function decodeBlock(value: Buffer): BlockOption | null {
  if (value.length > 3) return null;
  const n = decodeUint(value);
  return { num: Math.floor(n / 16), more: (n & 0x08) !== 0, szx: n & 0x07 };
}

export function encodeBlock(b: BlockOption): Buffer {
  return encodeUint(b.num * 16 + (b.more ? 8 : 0) + b.szx);
}

/** Why a Block1 upload cannot continue, as the response code to send. */
export type Block1Refusal = { code: '4.00' | '4.08' | '4.13' | '5.03'; message: string };

/**
 * Bytes of unfinished uploads, shared by every peer of a listener, so many peers cannot together hold unbounded
 * memory; and bytes per owner (a device: all its sessions together), so one device with many sessions cannot take
 * the budget every other device's uploads need.
 */
export class UploadBudget {
  readonly totalBytes: number;
  readonly perOwnerBytes: number;
  #available: number;
  readonly #held = new Map<unknown, number>();

  constructor(totalBytes: number, perOwnerBytes = totalBytes) {
    this.totalBytes = totalBytes;
    this.perOwnerBytes = perOwnerBytes;
    this.#available = totalBytes;
  }

  get available(): number {
    return this.#available;
  }

  /** Bytes `owner` holds now. */
  heldBy(owner: unknown): number {
    return this.#held.get(owner) ?? 0;
  }

  take(owner: unknown, n: number): boolean {
    const held = this.heldBy(owner);
    if (n > this.#available || held + n > this.perOwnerBytes) return false;
    this.#available -= n;
    this.#held.set(owner, held + n);
    return true;
  }

  give(owner: unknown, n: number): void {
    const held = this.heldBy(owner);
    const back = Math.min(n, held);
    if (held - back > 0) this.#held.set(owner, held - back);
    else this.#held.delete(owner);
    this.#available = Math.min(this.totalBytes, this.#available + back);
  }
}

interface Upload {
  chunks: Buffer[];
  size: number;
  owner: unknown;
  timer: ClockTimer;
}

/**
 * Reassembles Block1 uploads of one peer, keyed by the request's method and URI (RFC 7959 §2.3: a block belongs to
 * the body of the request with the same options). Bounded: `maxBytes` per upload, `maxUploads` at once (the oldest
 * is dropped), each dropped `lifetimeMs` after its last block (by a timer: an abandoned upload gives its bytes back
 * to the budget even when its peer never sends again).
 */
export class Block1Assembler {
  readonly #uploads = new Map<string, Upload>();
  readonly #maxBytes: number;
  readonly #maxUploads: number;
  readonly #lifetimeMs: number;
  readonly #budget: UploadBudget;
  readonly #clock: Clock;

  constructor(opts: { maxBytes: number; maxUploads: number; lifetimeMs: number; budget?: UploadBudget; clock?: Clock }) {
    this.#maxBytes = opts.maxBytes;
    this.#maxUploads = opts.maxUploads;
    this.#lifetimeMs = opts.lifetimeMs;
    this.#budget = opts.budget ?? new UploadBudget(opts.maxBytes * opts.maxUploads);
    this.#clock = opts.clock ?? SYSTEM_CLOCK;
  }

  get size(): number {
    return this.#uploads.size;
  }

  /**
   * Adds one block. Returns the whole body after the last block, 'continue' after any other, or a refusal (the
   * upload is then forgotten). `size1` is the total the client announced, if it did; `owner` is whom the upload's
   * bytes count against in the budget.
   */
  add(key: string, block: BlockOption, payload: Buffer, size1: number | undefined, owner: unknown): Buffer | 'continue' | Block1Refusal {
    const tooLarge: Block1Refusal = { code: '4.13', message: `body exceeds ${this.#maxBytes} bytes` };
    if (block.szx === 7) return { code: '4.00', message: 'block size exponent 7 (BERT) is not for UDP' };
    if (size1 !== undefined && size1 > this.#maxBytes) return tooLarge;
    const size = blockSize(block.szx);
    if (block.more && payload.length !== size) {
      this.#drop(key);
      return { code: '4.00', message: `block ${block.num} carries ${payload.length} bytes, not ${size}` };
    }
    const offset = block.num * size;
    let upload = this.#uploads.get(key);
    if (offset === 0) {
      this.#drop(key);
      upload = { chunks: [], size: 0, owner, timer: this.#expire(key) };
      if (this.#uploads.size >= this.#maxUploads) this.#drop(this.#uploads.keys().next().value as string);
      this.#uploads.set(key, upload);
    }
    if (!upload || upload.size !== offset) {
      this.#drop(key);
      return { code: '4.08', message: `block ${block.num} does not follow the blocks received` };
    }
    if (upload.size + payload.length > this.#maxBytes) {
      this.#drop(key);
      return tooLarge;
    }
    if (!this.#budget.take(upload.owner, payload.length)) {
      this.#drop(key);
      return { code: '5.03', message: 'too many uploads in progress; try again later' };
    }
    upload.chunks.push(payload);
    upload.size += payload.length;
    this.#clock.clearTimeout(upload.timer);
    upload.timer = this.#expire(key);
    if (block.more) return 'continue';
    this.#drop(key);
    return Buffer.concat(upload.chunks);
  }

  clear(): void {
    for (const key of [...this.#uploads.keys()]) this.#drop(key);
  }

  /** The timer that drops upload `key` BLOCKWISE_STATUS_LIFETIME after its last block. */
  #expire(key: string): ClockTimer {
    const timer = this.#clock.setTimeout(() => this.#drop(key), this.#lifetimeMs);
    timer.unref();
    return timer;
  }

  #drop(key: string): void {
    const upload = this.#uploads.get(key);
    if (!upload) return;
    this.#clock.clearTimeout(upload.timer);
    this.#budget.give(upload.owner, upload.size);
    this.#uploads.delete(key);
  }
}

/** Block `num` of `body` at size exponent `szx`, or null when the body has no such block. */
export function sliceBlock(body: Buffer, num: number, szx: number): { payload: Buffer; more: boolean } | null {
  const size = blockSize(szx);
  const start = num * size;
  if (start >= body.length && !(num === 0 && body.length === 0)) return null;
  return { payload: body.subarray(start, start + size), more: start + size < body.length };
}
