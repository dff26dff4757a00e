/**
 * One CoAP peer as seen by a server (RFC 7252, RFC 7959), independent of the transport: a DTLS session or a plain
 * UDP address both hand datagrams to `receive` and give a `send`. The layers, in the order a datagram meets them:
 *
 *   decode       malformed → dropped (a Confirmable one gets a Reset); ping (Empty CON) → Reset
 *   matcher      ACK/RST stop the retransmission of our separate response; a duplicate CON message id gets the
 *                reply stored for it (piggybacked response or empty ACK), a duplicate NON nothing (dedup.ts)
 *   admit        an optional check before anything is buffered (plain CoAP's identity). A request answered before
 *                it is admitted (4.02, 4.05, 5.05, the refusal itself) is not remembered, one whose handler refuses
 *                it (`refused`) is forgotten once answered: recomputing such an answer is cheap, and an
 *                unauthenticated peer leaves no state.
 *                When the peer's address is not proven (`unprovenPeer`: plain UDP) such an answer is no larger than
 *                the datagram that asked for it (RFC 7252 §11.3: no amplification toward a forged source)
 *   blockwise    Block1 uploads reassembled (2.31 Continue per block), Block2 answers sliced and kept while fetched
 *   handler      the request with its whole body (at most `maxInFlight` at once per peer); its answer is piggybacked when ready within `piggybackMs`,
 *                else an empty ACK goes first and the answer follows as a Confirmable response, retransmitted
 *                (ACK_TIMEOUT × random factor, doubling, MAX_RETRANSMIT times) until ACKed or Reset; a NON request
 *                gets a NON response unless its No-Response option (RFC 7967) declines that class
 */
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Block1Assembler, blockSize, decodeBlock, encodeBlock, sliceBlock } from './block.ts';
import type { BlockOption, UploadBudget } from './block.ts';
import type { Clock, ClockTimer } from '../app/clock.ts';
import { COAP_DEFAULTS, SYSTEM_CLOCK } from './config.ts';
import type { CoapConfig } from './config.ts';
import { Deduplicator } from './dedup.ts';
import type { DedupLimit, Seen } from './dedup.ts';
import { METHODS, decode, emptyMessage, encode, encodeUint, option, stringOptions, uintOption, unrecognisedCritical } from './message.ts';
import type { CoapMessage, CoapOption } from './message.ts';

export interface CoapRequest {
  method: string;
  token: Buffer;
  /** The options of the request (of its last block when it came in Block1 blocks). */
  options: CoapOption[];
  /** The whole body, reassembled when it came in Block1 blocks. */
  payload: Buffer;
  confirmable: boolean;
}

export interface CoapResponse {
  /** 'c.dd', e.g. '2.05' */
  code: string;
  options?: CoapOption[];
  payload?: Buffer;
  /** The request was refused as unauthenticated (e.g. 4.01): answered like the refusals of `admit` (see the layers above). */
  refused?: boolean;
}

export type CoapHandler = (request: CoapRequest) => Promise<CoapResponse>;

export interface CoapEndpointOptions extends Partial<CoapConfig> {
  send(datagram: Buffer): void;
  handler: CoapHandler;
  /** The body of an error this layer answers itself (4.02, 4.08, 4.13, ...). Default: the message as text (RFC 7252 §5.5.2). */
  diagnostic?(code: string, message: string): { payload: Buffer; options: CoapOption[] };
  /** Runs on every request before block-wise reassembly: a response refuses it (e.g. 4.01), null lets it through. */
  admit?(request: { method: string; options: CoapOption[] }): CoapResponse | null;
  /** Bytes of unfinished Block1 uploads this endpoint may hold, shared with other endpoints (5.03 when spent). */
  uploadBudget?: UploadBudget;
  /** Whom an upload's bytes count against in `uploadBudget` (e.g. the device of a session). Default: this endpoint. */
  uploadOwner?(options: CoapOption[]): unknown;
  /** Message ids remembered by this endpoint and the others sharing the limit. Default: only `maxDedupEntries` bounds them. */
  dedupLimit?: DedupLimit;
  /** The peer's source address is not proven (plain UDP): refusals of unauthenticated requests never outgrow the request. */
  unprovenPeer?: boolean;
  /** Where this endpoint's message ids continue (an endpoint carried on from another process's). Default: random. */
  lastMessageId?: number;
  /**
   * The last request the endpoint before this one answered with a piggybacked reply (an endpoint carried on from
   * another process's): its retransmission gets that reply again instead of running the handler a second time.
   */
  lastExchange?: Exchange;
  /** Time for the piggyback window, retransmission, exchange lifetime and deduplication. Default: the wall clock. */
  clock?: Clock;
}

/** A request's message id and the datagram that answered it. */
export interface Exchange {
  messageId: number;
  reply: Buffer;
}

/** Unknown critical options a 4.02 names: the rest are counted (RFC 7252 §5.4.1 only asks to reject). */
const LISTED_CRITICAL = 8;

interface Outstanding {
  datagram: Buffer;
  timer: ClockTimer;
  retransmits: number;
  waitMs: number;
}
/** `szx`: the largest block size whose message fits `maxMessageBytes` with this answer's options */
interface LargeAnswer {
  response: CoapResponse;
  payload: Buffer;
  etag: Buffer;
  expires: number;
  szx: number;
}

/**
 * Emits 'malformed' (reason: string) for a datagram dropped or Reset, 'giveUp' (messageId) when a separate response
 * was never acknowledged, and 'failure' (err: Error) when handling a datagram or an answer threw: the exchange is
 * dropped and the endpoint (and its transport's listener) carries on.
 */
export class CoapEndpoint extends EventEmitter {
  readonly #config: CoapConfig;
  readonly #send: (datagram: Buffer) => void;
  readonly #handler: CoapHandler;
  readonly #diagnostic: NonNullable<CoapEndpointOptions['diagnostic']>;
  readonly #admit: CoapEndpointOptions['admit'];
  readonly #dedup: Deduplicator;
  readonly #clock: Clock;
  readonly #uploadOwner: (options: CoapOption[]) => unknown;
  readonly #unprovenPeer: boolean;
  readonly #outstanding = new Map<number, Outstanding>();
  // created on first use: most devices never upload in blocks nor fetch large answers
  #uploads: Block1Assembler | null = null;
  #answers: Map<string, LargeAnswer> | null = null;
  readonly #uploadBudget: UploadBudget | undefined;
  #nextMessageId = Math.floor(Math.random() * 0x10000);
  #running = 0;
  #closed = false;
  #lastExchange: Exchange | undefined;

  constructor(opts: CoapEndpointOptions) {
    super();
    const { send, handler, diagnostic, admit, uploadBudget, uploadOwner, dedupLimit, unprovenPeer, lastMessageId, lastExchange, clock, ...config } = opts;
    this.#clock = clock ?? SYSTEM_CLOCK;
    this.#admit = admit;
    this.#diagnostic = diagnostic ?? ((_code, message) => ({ payload: Buffer.from(message), options: [] }));
    this.#config = { ...COAP_DEFAULTS, ...Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined)) };
    this.#send = send;
    this.#handler = handler;
    this.#uploadBudget = uploadBudget;
    this.#uploadOwner = uploadOwner ?? (() => this);
    this.#unprovenPeer = unprovenPeer ?? false;
    if (lastMessageId !== undefined) this.#nextMessageId = lastMessageId & 0xffff;
    this.#dedup = new Deduplicator({ maxEntries: this.#config.maxDedupEntries, lifetimeMs: this.#config.exchangeLifetimeMs, limit: dedupLimit });
    if (lastExchange) {
      this.#dedup.remember(lastExchange.messageId, this.#clock.now()).reply = lastExchange.reply;
      this.#lastExchange = lastExchange;
    }
  }

  /** The last request answered with a piggybacked reply (what a next process's endpoint needs to answer its retransmission). */
  get lastExchange(): Exchange | undefined {
    return this.#lastExchange;
  }

  /** Whether a request with this message id was seen within EXCHANGE_LIFETIME (a retransmission, not a new request). */
  remembers(messageId: number): boolean {
    return this.#dedup.get(messageId, this.#clock.now()) !== undefined;
  }

  /** Requests whose handler is still running plus separate responses not yet acknowledged. */
  get pending(): number {
    return this.#running + this.#outstanding.size;
  }

  /** Message ids remembered for deduplication (bounded by `maxDedupEntries`). */
  get remembered(): number {
    return this.#dedup.size;
  }

  /** No exchange pending and no upload or sliced answer held: what this endpoint remembers fits in its attachment. */
  get settled(): boolean {
    return this.pending === 0 && (this.#uploads?.size ?? 0) === 0 && (this.#answers?.size ?? 0) === 0;
  }

  /** Nothing kept for this peer: no exchange pending, no message id remembered, no upload or answer held. */
  get idle(): boolean {
    return this.settled && this.#dedup.size === 0;
  }

  receive(datagram: Buffer): void {
    if (this.#closed) return;
    try {
      this.#receive(datagram);
    } catch (err) {
      this.emit('failure', err);
    }
  }

  #receive(datagram: Buffer): void {
    const d = decode(datagram);
    if (d.kind !== 'message') {
      if (d.kind === 'malformed' && d.confirmable && d.messageId !== null) this.#send(emptyMessage('RST', d.messageId));
      this.emit('malformed', d.reason);
      return;
    }
    const m = d.message;
    if (m.type === 'ACK' || m.type === 'RST') {
      const o = this.#outstanding.get(m.messageId);
      if (o) {
        this.#clock.clearTimeout(o.timer);
        this.#outstanding.delete(m.messageId);
      }
      return;
    }
    const codeClass = Number(m.code.split('.')[0]);
    if (m.code === '0.00' || codeClass !== 0) {
      // a ping, or a response/reserved class where we sent no request: reject a Confirmable one (RFC 7252 §4.2)
      if (m.type === 'CON') this.#send(emptyMessage('RST', m.messageId));
      return;
    }
    const now = this.#clock.now();
    const seen = this.#dedup.get(m.messageId, now);
    if (seen) {
      if (m.type === 'CON' && seen.reply) this.#send(seen.reply);
      return;
    }
    this.#request(m, datagram.length, now);
  }

  /** Stops every timer and forgets every exchange. */
  close(): void {
    this.#closed = true;
    for (const o of this.#outstanding.values()) this.#clock.clearTimeout(o.timer);
    this.#outstanding.clear();
    this.#dedup.clear();
    this.#answers?.clear();
    this.#uploads?.clear();
  }

  #error(code: string, message: string, options: CoapOption[] = []): CoapResponse {
    const d = this.#diagnostic(code, message);
    return { code, options: [...options, ...d.options], payload: d.payload };
  }

  #request(m: CoapMessage, size: number, now: number): void {
    // answers before admission refuse an unauthenticated request: its message id is not even remembered (making room
    // for it could push out another peer's)
    const refuse = (res: CoapResponse) => this.#respond(m, size, { expires: 0, reply: null }, { ...res, refused: true }, false);
    const method = METHODS[m.code];
    if (!method) return refuse(this.#error('4.05', `method ${m.code} is not supported`));
    const bad = unrecognisedCritical(m.options);
    if (bad.length > 0) {
      const more = bad.length > LISTED_CRITICAL ? ` and ${bad.length - LISTED_CRITICAL} more` : '';
      return refuse(this.#error('4.02', `unrecognised critical option ${bad.slice(0, LISTED_CRITICAL).join(', ')}${more}`));
    }
    if (option(m.options, 'Proxy-Uri') || option(m.options, 'Proxy-Scheme')) return refuse(this.#error('5.05', 'this server is not a proxy'));
    const refused = this.#admit?.({ method, options: m.options });
    if (refused) return refuse(refused);
    const entry = this.#dedup.remember(m.messageId, now);
    const immediate = (res: CoapResponse) => this.#respond(m, size, entry, res, false);
    const key = `${method} ${stringOptions(m.options, 'Uri-Path').join('/')}?${stringOptions(m.options, 'Uri-Query').join('&')}`;
    const block2Value = option(m.options, 'Block2');
    const block2 = block2Value ? decodeBlock(block2Value) : null;
    if (block2Value && !block2) return immediate(this.#error('4.02', 'Block2 option longer than 3 bytes'));
    const block1Value = option(m.options, 'Block1');
    const limit = this.#config.maxBodyBytes;
    const tooLarge = () => immediate(this.#error('4.13', `body exceeds ${limit} bytes`, [{ name: 'Size1', value: encodeUint(limit) }]));
    let body = m.payload;
    let block1Echo: CoapOption | null = null;
    if (block1Value) {
      const block1 = decodeBlock(block1Value);
      if (!block1) return immediate(this.#error('4.02', 'Block1 option longer than 3 bytes'));
      this.#uploads ??= new Block1Assembler({
        maxBytes: limit,
        maxUploads: this.#config.maxUploads,
        lifetimeMs: this.#config.blockwiseStatusLifetimeMs,
        budget: this.#uploadBudget,
        clock: this.#clock,
      });
      const result = this.#uploads.add(key, block1, m.payload, uintOption(m.options, 'Size1'), this.#uploadOwner(m.options));
      if (result === 'continue') return immediate({ code: '2.31', options: [{ name: 'Block1', value: encodeBlock(block1) }] });
      if (!Buffer.isBuffer(result)) {
        return result.code === '4.13' ? tooLarge() : immediate(this.#error(result.code, result.message));
      }
      body = result;
      block1Echo = { name: 'Block1', value: encodeBlock({ ...block1, more: false }) };
    } else if (m.payload.length > limit || (uintOption(m.options, 'Size1') ?? 0) > limit) {
      return tooLarge();
    }

    const szx = Math.min(block2?.szx ?? this.#config.preferredSzx, this.#config.preferredSzx);
    if (block2 && block2.num > 0) {
      const kept = this.#answers?.get(key);
      if (kept && kept.expires > now) return immediate(this.#block(key, kept, block2.num, szx));
    }

    if (this.#running >= this.#config.maxInFlight) {
      // RFC 7252 asks clients for one outstanding request (NSTART 1); a peer far beyond that waits its turn
      return immediate(
        this.#error('5.03', `more than ${this.#config.maxInFlight} requests of this peer in progress; try again`, [{ name: 'Max-Age', value: encodeUint(1) }]),
      );
    }
    // the handler: piggybacked if it answers within the window, else empty ACK now and a separate response later.
    // Not for a CON that carries Block2: libcoap up to 4.3.1 (Debian 12's) builds its block state from the
    // request still awaiting its ACK and silently drops a separate response that starts a Block2 transfer. Such a
    // client's retransmissions go unanswered (a duplicate with no reply yet) until the answer rides on the ACK.
    let separate = false;
    const window =
      m.type === 'CON' && !block2
        ? this.#clock.setTimeout(
            () =>
              this.#guarded(() => {
                separate = true;
                entry.reply = emptyMessage('ACK', m.messageId);
                this.#send(entry.reply);
              }),
            this.#config.piggybackMs,
          )
        : null;
    this.#running++;
    // a handler that throws at once is answered like one that rejects (and its count still comes down)
    new Promise<CoapResponse>((resolve) => resolve(this.#handler({ method, token: m.token, options: m.options, payload: body, confirmable: m.type === 'CON' })))
      .catch((err: Error) => this.#error('5.00', err.message))
      .then((res) => {
        if (window) this.#clock.clearTimeout(window);
        if (this.#closed) return;
        try {
          let shaped = this.#shape(key, res, block2?.num ?? 0, szx, this.#clock.now());
          if (block1Echo) shaped = { ...shaped, options: [...(shaped.options ?? []), block1Echo] };
          this.#respond(m, size, entry, shaped, separate);
        } catch (err) {
          // an answer that cannot be encoded (an option coap-packet refuses): the device still gets an answer
          this.#respond(m, size, entry, this.#error('5.00', `the answer could not be encoded: ${(err as Error).message}`), separate);
        }
      })
      // an unhandled rejection would end the process
      .catch((err: Error) => this.emit('failure', err))
      .finally(() => {
        this.#running--;
      });
  }

  /**
   * A response whose payload exceeds the block size, or would make the message larger than `maxMessageBytes`, becomes
   * its block `num` (at a smaller size when its options leave no room for the asked one), the whole kept for the next blocks.
   */
  #shape(key: string, res: CoapResponse, num: number, askedSzx: number, now: number): CoapResponse {
    const payload = res.payload ?? Buffer.alloc(0);
    const max = this.#config.maxMessageBytes;
    const own = (res.options ?? []).filter((o) => !['Block2', 'Size2', 'ETag'].includes(o.name));
    const headroom = (options: CoapOption[]) =>
      encode({ type: 'ACK', code: res.code, messageId: 0, token: Buffer.alloc(8), options, payload: Buffer.alloc(0) }).length + 1;
    // header 4, token ≤ 8, payload marker 1, and an option never takes more than 5 bytes besides its value
    const bound = (res.options ?? []).reduce((n, o) => n + 5 + o.value.length, 13);
    if (num === 0 && payload.length <= blockSize(askedSzx) && (bound + payload.length <= max || headroom(res.options ?? []) + payload.length <= max))
      return res;
    const blockOptions = [
      ...own,
      { name: 'Block2', value: Buffer.alloc(3) },
      { name: 'Size2', value: Buffer.alloc(4) },
      { name: 'ETag', value: Buffer.alloc(8) },
    ];
    let szx = this.#config.preferredSzx;
    while (szx > 0 && headroom(blockOptions) + blockSize(szx) > max) szx--;
    const etag = createHash('sha256').update(payload).digest().subarray(0, 8);
    const answer: LargeAnswer = { response: res, payload, etag, expires: now + this.#config.exchangeLifetimeMs, szx };
    this.#answers ??= new Map();
    this.#answers.delete(key);
    if (this.#answers.size >= this.#config.maxBlock2Answers) this.#answers.delete(this.#answers.keys().next().value as string);
    this.#answers.set(key, answer);
    return this.#block(key, answer, num, askedSzx);
  }

  /** Block `num` at the size the client asked for, or at the answer's largest that fits (RFC 7959 §2.4: the client then continues at ours). */
  #block(key: string, answer: LargeAnswer, askedNum: number, askedSzx: number): CoapResponse {
    const szx = Math.min(askedSzx, answer.szx);
    const num = askedNum * 2 ** (askedSzx - szx);
    const slice = sliceBlock(answer.payload, num, szx);
    if (!slice) return this.#error('4.02', `block ${num} is beyond the ${answer.payload.length}-byte answer`);
    if (!slice.more) this.#answers?.delete(key);
    const block: BlockOption = { num, more: slice.more, szx };
    const own = (answer.response.options ?? []).filter((o) => !['Block2', 'Size2', 'ETag'].includes(o.name));
    return {
      code: answer.response.code,
      options: [
        ...own,
        { name: 'Block2', value: encodeBlock(block) },
        { name: 'Size2', value: encodeUint(answer.payload.length) },
        { name: 'ETag', value: answer.etag },
      ],
      payload: slice.payload,
    };
  }

  /** Runs `work` from a timer or a promise callback, where an exception would otherwise end the process. */
  #guarded(work: () => void): void {
    try {
      work();
    } catch (err) {
      this.emit('failure', err);
    }
  }

  /** `size`: the request's datagram, the bound of a refusal's answer to an unproven peer. */
  #respond(m: CoapMessage, size: number, entry: Seen, res: CoapResponse, separate: boolean): void {
    if (res.refused && this.#dedup.get(m.messageId, this.#clock.now()) === entry) this.#dedup.forget(m.messageId);
    if (m.type === 'NON' && suppressed(m.options, res.code)) return;
    const piggybacked = m.type === 'CON' && !separate;
    const messageId = piggybacked ? m.messageId : this.#newMessageId();
    const type = piggybacked ? 'ACK' : m.type === 'CON' ? 'CON' : 'NON';
    const message: CoapMessage = {
      type,
      code: res.code,
      messageId,
      token: m.token,
      options: [...(res.options ?? [])],
      payload: res.payload ?? Buffer.alloc(0),
    };
    const datagram = res.refused && this.#unprovenPeer ? encodeWithin(message, size) : encode(message);
    if (piggybacked) {
      entry.reply = datagram;
      if (!res.refused) this.#lastExchange = { messageId: m.messageId, reply: datagram };
    }
    this.#send(datagram);
    if (type === 'CON') this.#retransmit(messageId, datagram);
  }

  #retransmit(messageId: number, datagram: Buffer): void {
    const { ackTimeoutMs, ackRandomFactor } = this.#config;
    const o: Outstanding = {
      datagram,
      retransmits: 0,
      waitMs: ackTimeoutMs * (1 + Math.random() * (ackRandomFactor - 1)),
      timer: undefined as unknown as ClockTimer,
    };
    const fire = () =>
      this.#guarded(() => {
        if (o.retransmits >= this.#config.maxRetransmit) {
          this.#outstanding.delete(messageId);
          this.emit('giveUp', messageId);
          return;
        }
        o.retransmits++;
        this.#send(o.datagram);
        o.waitMs *= 2;
        o.timer = this.#clock.setTimeout(fire, o.waitMs);
      });
    o.timer = this.#clock.setTimeout(fire, o.waitMs);
    this.#outstanding.set(messageId, o);
  }

  /** The message id this endpoint used last (a next process's endpoint for the same peer continues after it). */
  get lastMessageId(): number {
    return this.#nextMessageId;
  }

  #newMessageId(): number {
    this.#nextMessageId = (this.#nextMessageId + 1) & 0xffff;
    return this.#nextMessageId;
  }
}

/** RFC 7967: a NON request's No-Response option names the response classes the client does not want (2: 2.xx, 8: 4.xx, 16: 5.xx). */
function suppressed(options: CoapOption[], code: string): boolean {
  const mask = uintOption(options, 'No-Response');
  if (mask === undefined) return false;
  const bit = ({ '2': 2, '4': 8, '5': 16 } as Record<string, number>)[code[0]] ?? 0;
  return (mask & bit) !== 0;
}

/**
 * `m` encoded in at most `limit` bytes: without its payload (and the payload's Content-Format) when it would not fit,
 * then without any option. The header and token are never larger than the request's, so the code always goes.
 */
function encodeWithin(m: CoapMessage, limit: number): Buffer {
  const whole = encode(m);
  if (whole.length <= limit) return whole;
  const bare = encode({ ...m, options: m.options.filter((o) => o.name !== 'Content-Format'), payload: Buffer.alloc(0) });
  return bare.length <= limit ? bare : encode({ ...m, options: [], payload: Buffer.alloc(0) });
}
