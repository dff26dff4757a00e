/**
 * CoAP messages (RFC 7252 §3) on top of `coap-packet`: a strict structural check first (coap-packet's parser is
 * lenient: it truncates options that run past the datagram and accepts 9..15-byte tokens), then coap-packet parses.
 * Option values are typed here once: uint, string or opaque, by option number.
 */
import { generate, parse } from 'coap-packet';
import type { ParsedPacket } from 'coap-packet';

export type CoapOption = { name: string; value: Buffer };

/** What a datagram turned out to be. `malformed` keeps what could be read so a Confirmable one can be rejected. */
export type Decoded =
  | { kind: 'message'; message: CoapMessage }
  | { kind: 'malformed'; reason: string; messageId: number | null; confirmable: boolean }
  | { kind: 'ignored'; reason: string };

export interface CoapMessage {
  type: 'CON' | 'NON' | 'ACK' | 'RST';
  /** 'c.dd' as on the wire, e.g. '0.02' (POST), '2.05' (Content), '0.00' (Empty). */
  code: string;
  messageId: number;
  token: Buffer;
  options: CoapOption[];
  payload: Buffer;
}

export const METHODS: Record<string, string> = {
  '0.01': 'GET',
  '0.02': 'POST',
  '0.03': 'PUT',
  '0.04': 'DELETE',
  '0.05': 'FETCH',
  '0.06': 'PATCH',
  '0.07': 'IPATCH',
};

export const ContentFormat = { text: 0, linkFormat: 40, xml: 41, octetStream: 42, exi: 47, json: 50, cbor: 60 } as const;

/** Option numbers this server understands (RFC 7252 §5.4.1: an unrecognised critical option in a request is 4.02). */
export const OptionNumber = {
  'If-Match': 1,
  'Uri-Host': 3,
  ETag: 4,
  'If-None-Match': 5,
  Observe: 6,
  'Uri-Port': 7,
  'Location-Path': 8,
  'Uri-Path': 11,
  'Content-Format': 12,
  'Max-Age': 14,
  'Uri-Query': 15,
  'Hop-Limit': 16,
  Accept: 17,
  'Location-Query': 20,
  Block2: 23,
  Block1: 27,
  Size2: 28,
  'Proxy-Uri': 35,
  'Proxy-Scheme': 39,
  Size1: 60,
  'No-Response': 258,
} as const;

const UINT_OPTIONS = new Set(['Observe', 'Uri-Port', 'Content-Format', 'Max-Age', 'Hop-Limit', 'Accept', 'Block2', 'Block1', 'Size2', 'Size1', 'No-Response']);
const STRING_OPTIONS = new Set(['Uri-Host', 'Location-Path', 'Uri-Path', 'Uri-Query', 'Location-Query', 'Proxy-Uri', 'Proxy-Scheme']);

/** Every name coap-packet gives an option number, understood here or not. */
const NAMED: Record<string, number> = {
  ...OptionNumber,
  OSCORE: 9,
  'Q-Block1': 19,
  'Q-Block2': 31,
  'OCF-Accept-Content-Format-Version': 2049,
  'OCF-Content-Format-Version': 2053,
};

/** The option's number, whether coap-packet named it or left it numeric. */
export function optionNumber(o: CoapOption): number {
  return NAMED[o.name] ?? Number(o.name);
}

/** Critical options (odd numbers, RFC 7252 §5.4.6) that this server does not understand. */
const KNOWN_OPTIONS = new Set<number>(Object.values(OptionNumber));

export function unrecognisedCritical(options: CoapOption[]): number[] {
  const unknown: number[] = [];
  for (const o of options) {
    const n = optionNumber(o);
    if (n % 2 === 1 && !KNOWN_OPTIONS.has(n)) unknown.push(n);
  }
  return unknown;
}

export function encodeUint(n: number): Buffer {
  if (n === 0) return Buffer.alloc(0);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v % 256);
  return Buffer.from(bytes);
}

export function decodeUint(b: Buffer): number {
  let n = 0;
  for (const byte of b) n = n * 256 + byte;
  return n;
}

export function option(options: CoapOption[], name: string): Buffer | undefined {
  return options.find((o) => o.name === name)?.value;
}

export function uintOption(options: CoapOption[], name: string): number | undefined {
  const v = option(options, name);
  return v === undefined ? undefined : decodeUint(v);
}

export function stringOptions(options: CoapOption[], name: string): string[] {
  return options.filter((o) => o.name === name).map((o) => o.value.toString('utf8'));
}

/** An option's value as text: decimal for uint options, UTF-8 for string options, hex for opaque ones. */
export function optionText(o: CoapOption): string {
  if (UINT_OPTIONS.has(o.name)) return String(decodeUint(o.value));
  if (STRING_OPTIONS.has(o.name)) return o.value.toString('utf8');
  return o.value.toString('hex');
}

/** Checks the framing of RFC 7252 §3 without trusting any length field. */
function structuralError(b: Buffer): string | null {
  const tkl = b[0] & 0x0f;
  if (tkl > 8) return 'token length 9..15 is reserved';
  if (b.length < 4 + tkl) return 'datagram shorter than its token';
  if (b[1] === 0) return b.length === 4 && tkl === 0 ? null : 'an Empty message must be 4 bytes';
  let i = 4 + tkl;
  while (i < b.length) {
    const byte = b[i++];
    if (byte === 0xff) return i === b.length ? 'payload marker followed by no payload' : null;
    const delta = byte >> 4;
    let length = byte & 0x0f;
    if (delta === 15 || length === 15) return 'option nibble 15 is reserved';
    // the delta's value does not matter for framing, only how many extension bytes it takes
    i += delta === 13 ? 1 : delta === 14 ? 2 : 0;
    if (i > b.length) return 'truncated option';
    if (length === 13) {
      if (i + 1 > b.length) return 'truncated option';
      length = b[i++] + 13;
    } else if (length === 14) {
      if (i + 2 > b.length) return 'truncated option';
      length = b.readUInt16BE(i) + 269;
      i += 2;
    }
    if (i + length > b.length) return 'option value runs past the datagram';
    i += length;
  }
  return null;
}

const TYPES = ['CON', 'NON', 'ACK', 'RST'] as const;

/** Decodes one datagram. Unknown versions and runts are ignored (RFC 7252 §3); other format errors are malformed. */
export function decode(datagram: Buffer): Decoded {
  if (datagram.length < 4) return { kind: 'ignored', reason: 'shorter than the 4-byte header' };
  if (datagram[0] >> 6 !== 1) return { kind: 'ignored', reason: 'unknown version' };
  const type = TYPES[(datagram[0] >> 4) & 0x03];
  const messageId = datagram.readUInt16BE(2);
  const error = structuralError(datagram);
  if (error) return { kind: 'malformed', reason: error, messageId, confirmable: type === 'CON' };
  let p: ParsedPacket;
  try {
    p = parse(datagram);
  } catch (err) {
    return { kind: 'malformed', reason: (err as Error).message, messageId, confirmable: type === 'CON' };
  }
  return {
    kind: 'message',
    message: {
      type,
      code: p.code,
      messageId,
      token: Buffer.from(p.token),
      options: p.options.map((o) => ({ name: String(o.name), value: Buffer.from(o.value) })),
      payload: Buffer.from(p.payload),
    },
  };
}

export function encode(m: CoapMessage): Buffer {
  return generate(
    {
      code: m.code,
      messageId: m.messageId,
      token: m.token,
      options: m.options,
      payload: m.payload,
      confirmable: m.type === 'CON',
      ack: m.type === 'ACK',
      reset: m.type === 'RST',
    },
    65_507,
  );
}

/** An Empty message (ACK or RST) for `messageId`. */
export function emptyMessage(type: 'ACK' | 'RST', messageId: number): Buffer {
  return Buffer.from([0x40 | (type === 'ACK' ? 0x20 : 0x30), 0, messageId >> 8, messageId & 0xff]);
}
