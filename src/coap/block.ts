/**
 * Block-wise transfers (RFC 7959): the Block1/Block2 option value, reassembly of an upload (Block1) and the slices
 * of a large answer (Block2).
 */
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
export type Block1Refusal = { code: '4.00' | '4.08' | '4.13'; message: string };

interface Upload { chunks: Buffer[]; size: number; expires: number }

/**
 * Reassembles Block1 uploads of one peer, keyed by the request's method and URI (RFC 7959 §2.3: a block belongs to
 * the body of the request with the same options). Bounded: `maxBytes` per upload, `maxUploads` at once (the oldest
 * is dropped), each forgotten `lifetimeMs` after its last block.
 */
export class Block1Assembler {
  readonly #uploads = new Map<string, Upload>();
  readonly #maxBytes: number;
  readonly #maxUploads: number;
  readonly #lifetimeMs: number;

  constructor(opts: { maxBytes: number; maxUploads: number; lifetimeMs: number }) {
    this.#maxBytes = opts.maxBytes;
    this.#maxUploads = opts.maxUploads;
    this.#lifetimeMs = opts.lifetimeMs;
  }

  get size(): number {
    return this.#uploads.size;
  }

  /**
   * Adds one block. Returns the whole body after the last block, 'continue' after any other, or a refusal (the
   * upload is then forgotten). `size1` is the total the client announced, if it did.
   */
  add(key: string, block: BlockOption, payload: Buffer, size1: number | undefined, now: number): Buffer | 'continue' | Block1Refusal {
    for (const [k, u] of this.#uploads) if (u.expires <= now) this.#uploads.delete(k);
    const tooLarge: Block1Refusal = { code: '4.13', message: `body exceeds ${this.#maxBytes} bytes` };
    if (block.szx === 7) return { code: '4.00', message: 'block size exponent 7 (BERT) is not for UDP' };
    if (size1 !== undefined && size1 > this.#maxBytes) return tooLarge;
    const size = blockSize(block.szx);
    if (block.more && payload.length !== size) {
      this.#uploads.delete(key);
      return { code: '4.00', message: `block ${block.num} carries ${payload.length} bytes, not ${size}` };
    }
    const offset = block.num * size;
    let upload = this.#uploads.get(key);
    if (offset === 0) {
      upload = { chunks: [], size: 0, expires: 0 };
      this.#uploads.delete(key);
      if (this.#uploads.size >= this.#maxUploads) this.#uploads.delete(this.#uploads.keys().next().value as string);
      this.#uploads.set(key, upload);
    }
    if (!upload || upload.size !== offset) {
      this.#uploads.delete(key);
      return { code: '4.08', message: `block ${block.num} does not follow the blocks received` };
    }
    if (upload.size + payload.length > this.#maxBytes) {
      this.#uploads.delete(key);
      return tooLarge;
    }
    upload.chunks.push(payload);
    upload.size += payload.length;
    upload.expires = now + this.#lifetimeMs;
    if (block.more) return 'continue';
    this.#uploads.delete(key);
    return Buffer.concat(upload.chunks);
  }

  clear(): void {
    this.#uploads.clear();
  }
}

/** Block `num` of `body` at size exponent `szx`, or null when the body has no such block. */
export function sliceBlock(body: Buffer, num: number, szx: number): { payload: Buffer; more: boolean } | null {
  const size = blockSize(szx);
  const start = num * size;
  if (start >= body.length && !(num === 0 && body.length === 0)) return null;
  return { payload: body.subarray(start, start + size), more: start + size < body.length };
}
