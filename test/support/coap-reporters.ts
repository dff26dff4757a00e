/**
 * CoAP/DTLS devices that keep their sessions and report at a steady pace: each is a CidClient (PSK, Connection ID)
 * sending Confirmable POSTs to /report with a number no other report has, retransmitted as RFC 7252 §4.2 says
 * (ACK_TIMEOUT, ACK_RANDOM_FACTOR 1.5, doubling, MAX_RETRANSMIT 4) until answered. An empty ACK stops the
 * retransmissions and the answer follows as a separate response, which is acknowledged. A 5.03 is a refusal: the
 * report is sent again as a new message after its Max-Age. A report whose retransmissions run out is counted
 * unanswered, and the device handshakes again (counted) and sends it anew: what a device does when its session is gone.
 *
 * Used by test/fleet/rolling-restart.test.ts and bench/rolling-restart.ts.
 */
import { randomBytes } from 'node:crypto';
import { generate, parse } from 'coap-packet';
import { CidClient } from './cid-client/client.ts';

export interface ReporterDevice {
  identity: string;
  key: Buffer;
  hashId: string;
}

export interface PacingOptions {
  /** the balancer's UDP port */
  port: number;
  /** each device sends a report every `periodMs` (when the one before is answered) */
  periodMs: number;
  /** RFC 7252 ACK_TIMEOUT (2000 ms there) */
  ackTimeoutMs: number;
}

/** One report from its first transmission to its answer. */
export interface ReportRecord {
  device: number;
  /** the number in its payload: unique over the run */
  n: number;
  sentAt: number;
  answeredAt: number | null;
  code: string | null;
  /** datagrams sent again for it (CoAP retransmissions) */
  retransmissions: number;
  /** 5.03 answers it got before the one that counts */
  refusals: number;
}

const ACK_RANDOM_FACTOR = 1.5;
const MAX_RETRANSMIT = 4;

let nextNumber = 1;

interface Exchange {
  mid: number;
  acked: boolean;
  done: (answer: { code: string; maxAge: number } | null) => void;
}

export class CoapReporter {
  client: CidClient;
  readonly index: number;
  /** full handshakes this device made (the first one included) */
  handshakes = 0;
  /** reports whose retransmissions ran out */
  unanswered = 0;
  /** when each ran out, and the node the session's CID named */
  readonly lost: Array<{ at: number; sentAt: number; cidNode: number; cid: string }> = [];
  #messageId = Math.floor(Math.random() * 0xffff);
  /** the exchange waiting for its answer, by token */
  readonly #waiting = new Map<string, Exchange>();
  readonly #port: number;
  readonly #device: ReporterDevice;
  #closed = false;

  constructor(port: number, device: ReporterDevice, index: number) {
    this.index = index;
    this.#port = port;
    this.#device = device;
    this.client = new CidClient(port, { identity: device.identity, psk: device.key });
  }

  /** A full handshake (a new client: nothing of the session before is used). */
  async connect(): Promise<void> {
    this.handshakes++;
    if (this.handshakes > 1) {
      this.client.close();
      this.client = new CidClient(this.#port, { identity: this.#device.identity, psk: this.#device.key });
    }
    await this.client.connect();
    // the client decrypts first (its listener came first); what it kept is read here
    this.client.socket.on('message', () => this.#drain());
  }

  /** Sends on the client's socket; nothing once closed (a retransmission timer of the last report may still fire). */
  #send(d: Buffer): void {
    if (!this.#closed) this.client.send(d);
  }

  /** Reads what arrived: ACKs (empty or piggybacked) and separate responses (acknowledged here). */
  #drain(): void {
    const received = this.client.received.splice(0);
    for (const { data } of received) {
      let p;
      try {
        p = parse(data);
      } catch {
        continue;
      }
      if (p.confirmable) this.#send(generate({ ack: true, messageId: p.messageId, code: '0.00', token: Buffer.alloc(0) }));
      if (p.ack && p.code === '0.00') {
        for (const e of this.#waiting.values()) if (e.mid === p.messageId) e.acked = true;
        continue;
      }
      const e = this.#waiting.get(p.token.toString('hex'));
      if (!e) continue; // a separate response sent again: acknowledged above
      const maxAge = p.options.find((o) => o.name === 'Max-Age')?.value;
      e.done({ code: p.code, maxAge: maxAge && maxAge.length > 0 ? maxAge.readUIntBE(0, maxAge.length) : 60 });
    }
  }

  /** One Confirmable POST with its retransmissions: the answer's code, or null when the retransmissions ran out. */
  #exchange(payload: Buffer, ackTimeoutMs: number, r: ReportRecord): Promise<{ code: string; maxAge: number } | null> {
    const token = randomBytes(4);
    const key = token.toString('hex');
    const mid = (this.#messageId = (this.#messageId + 1) & 0xffff);
    const datagram = generate({
      confirmable: true,
      code: 'POST',
      messageId: mid,
      token,
      options: [
        { name: 'Uri-Path', value: Buffer.from('report') },
        { name: 'Content-Format', value: Buffer.from([50]) },
      ],
      payload,
    });
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout;
      let sent = 0;
      let timeout = ackTimeoutMs * (1 + Math.random() * (ACK_RANDOM_FACTOR - 1));
      const e: Exchange = {
        mid,
        acked: false,
        done: (answer) => {
          clearTimeout(timer);
          this.#waiting.delete(key);
          resolve(answer);
        },
      };
      const retransmit = () => {
        // after an empty ACK the separate response follows when the handler answers (GATEWAY_WAIT_MS at most)
        if (e.acked) {
          timer = setTimeout(() => e.done(null), 30_000);
          return;
        }
        if (sent === MAX_RETRANSMIT) {
          e.done(null);
          return;
        }
        sent++;
        r.retransmissions++;
        this.#send(datagram);
        timeout *= 2;
        timer = setTimeout(retransmit, timeout);
      };
      this.#waiting.set(key, e);
      this.#send(datagram);
      timer = setTimeout(retransmit, timeout);
    });
  }

  /** Sends one report (a new unique number) until it has an answer that is not 5.03. */
  async report(ackTimeoutMs: number): Promise<ReportRecord> {
    const r: ReportRecord = { device: this.index, n: nextNumber++, sentAt: Date.now(), answeredAt: null, code: null, retransmissions: 0, refusals: 0 };
    const payload = Buffer.from(JSON.stringify({ d: this.index, seq: r.n }));
    for (;;) {
      const answer = await this.#exchange(payload, ackTimeoutMs, r);
      if (!answer && this.#closed) return r;
      if (!answer) {
        // the session is gone as far as this device can tell: a new handshake, and the report again
        this.unanswered++;
        this.lost.push({ at: Date.now(), sentAt: r.sentAt, cidNode: this.client.serverCid[0], cid: this.client.serverCid.toString('hex') });
        await this.connect();
        continue;
      }
      if (answer.code === '5.03') {
        r.refusals++;
        await new Promise((res) => setTimeout(res, answer.maxAge * 1000));
        continue;
      }
      r.code = answer.code;
      r.answeredAt = Date.now();
      return r;
    }
  }

  close(): void {
    this.#closed = true;
    for (const e of this.#waiting.values()) e.done(null);
    this.client.close();
  }
}

/** Connects `devices` through the balancer at `port`, `parallel` handshakes at a time. */
export async function connectReporters(port: number, devices: ReporterDevice[], parallel = 20): Promise<CoapReporter[]> {
  const reporters = devices.map((d, i) => new CoapReporter(port, d, i));
  for (let i = 0; i < reporters.length; i += parallel) await Promise.all(reporters.slice(i, i + parallel).map((r) => r.connect()));
  return reporters;
}

/** Every reporter sends a report each `periodMs` (from a random phase) until `stop` resolves; every report is recorded. */
export async function reportSteadily(reporters: CoapReporter[], o: PacingOptions, stop: Promise<void>): Promise<ReportRecord[]> {
  let stopped = false;
  void stop.then(() => {
    stopped = true;
  });
  const records: ReportRecord[] = [];
  await Promise.all(
    reporters.map(async (reporter) => {
      await new Promise((res) => setTimeout(res, Math.random() * o.periodMs));
      while (!stopped) {
        const started = Date.now();
        records.push(await reporter.report(o.ackTimeoutMs));
        await new Promise((res) => setTimeout(res, Math.max(0, started + o.periodMs - Date.now())));
      }
    }),
  );
  return records;
}

/** The p-th percentile of sorted numbers. */
export function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
