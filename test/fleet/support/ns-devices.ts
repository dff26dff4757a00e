/**
 * CoAP/DTLS devices in a process of their own, run inside the fleet's network namespace (`ip netns exec <ns> node
 * ns-devices.ts <config.json>`): the devices' network, where the nft balancer's VIP is. Half of them (or as the config
 * says) negotiate a Connection ID (the project's CidClient), the others do not (node-dtls-client, as many modems).
 * Each sends a Confirmable POST to /report every periodMs with a number no other report has, retransmitted as RFC 7252
 * §4.2 says (ACK_TIMEOUT, ACK_RANDOM_FACTOR 1.5, doubling, MAX_RETRANSMIT 4); a report whose retransmissions run out is
 * counted unanswered and the device handshakes again (counted) and sends it anew: what a device does when its session
 * is gone.
 *
 * Lines on stdout, one JSON object each: {"event":"ready"} once every device has made its handshake,
 * {"event":"progress","answered":n} each 250 ms, and after "stop" on stdin, {"event":"done", ...} with every report
 * and each device's counts. Used by test/fleet/nft-balancer.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { generate, parse } from 'coap-packet';
import { dtls } from 'node-dtls-client';
import { CidClient } from '../../support/cid-client/client.ts';

export interface NsDevicesConfig {
  host: string;
  port: number;
  periodMs: number;
  ackTimeoutMs: number;
  devices: Array<{ identity: string; key: string; cid: boolean }>;
  /** where the report numbers start (unique over a test's runs) */
  firstNumber: number;
}

export interface NsReport {
  device: number;
  n: number;
  sentAt: number;
  answeredAt: number | null;
  code: string | null;
  retransmissions: number;
}

export interface NsDeviceCounts {
  index: number;
  cid: boolean;
  handshakes: number;
  unanswered: number;
  localPort: number;
}

/** A DTLS connection to the VIP: the project's CID client, or node-dtls-client without a CID. */
interface Link {
  connect(): Promise<void>;
  send(datagram: Buffer): void;
  close(): void;
  readonly localPort: number;
}

function cidLink(c: NsDevicesConfig, d: NsDevicesConfig['devices'][number], onData: (b: Buffer) => void): Link {
  const client = new CidClient(c.port, { identity: d.identity, psk: Buffer.from(d.key, 'hex'), host: c.host });
  return {
    async connect() {
      await client.connect();
      // the client decrypts first (its listener came first); what it kept is read here
      client.socket.on('message', () => {
        for (const r of client.received.splice(0)) onData(r.data);
      });
    },
    send: (b) => {
      try {
        client.send(b);
      } catch {
        /* no session (a handshake that failed) or closed */
      }
    },
    close: () => client.close(),
    get localPort() {
      return client.localPort;
    },
  };
}

function plainLink(c: NsDevicesConfig, d: NsDevicesConfig['devices'][number], onData: (b: Buffer) => void): Link {
  let socket: dtls.Socket | null = null;
  let port = 0;
  return {
    connect: () =>
      new Promise<void>((resolve, reject) => {
        const s = dtls.createSocket({
          type: 'udp4',
          address: c.host,
          port: c.port,
          psk: { [d.identity]: Buffer.from(d.key, 'hex') },
          timeout: 10_000,
          ciphers: ['TLS_PSK_WITH_AES_128_CCM_8'],
        });
        socket = s;
        s.on('connected', () => {
          port = (s as unknown as { udp: { address(): { port: number } } }).udp.address().port;
          resolve();
        });
        s.on('error', reject);
        s.on('message', (m: Buffer) => onData(m));
      }),
    send: (b) => {
      try {
        socket?.send(b);
      } catch {
        /* a handshake that failed closed it: the retransmissions run out */
      }
    },
    close: () => {
      try {
        socket?.close();
      } catch {
        /* closed */
      }
    },
    get localPort() {
      return port;
    },
  };
}

const ACK_RANDOM_FACTOR = 1.5;
const MAX_RETRANSMIT = 4;

class Device {
  handshakes = 0;
  unanswered = 0;
  #link!: Link;
  #mid = Math.floor(Math.random() * 0xffff);
  readonly #waiting = new Map<string, { mid: number; acked: boolean; done: (code: string | null) => void }>();
  #closed = false;

  readonly index: number;
  readonly c: NsDevicesConfig;
  readonly d: NsDevicesConfig['devices'][number];

  constructor(index: number, c: NsDevicesConfig, d: NsDevicesConfig['devices'][number]) {
    this.index = index;
    this.c = c;
    this.d = d;
  }

  get localPort(): number {
    return this.#link.localPort;
  }

  async connect(): Promise<void> {
    this.handshakes++;
    this.#link?.close();
    const onData = (b: Buffer) => this.#onData(b);
    this.#link = this.d.cid ? cidLink(this.c, this.d, onData) : plainLink(this.c, this.d, onData);
    await this.#link.connect();
  }

  #send(b: Buffer): void {
    if (!this.#closed) this.#link.send(b);
  }

  #onData(data: Buffer): void {
    let p;
    try {
      p = parse(data);
    } catch {
      return;
    }
    if (p.confirmable) this.#send(generate({ ack: true, messageId: p.messageId, code: '0.00', token: Buffer.alloc(0) }));
    if (p.ack && p.code === '0.00') {
      for (const e of this.#waiting.values()) if (e.mid === p.messageId) e.acked = true;
      return;
    }
    this.#waiting.get(p.token.toString('hex'))?.done(p.code);
  }

  /** One Confirmable POST with RFC 7252's retransmissions: the answer's code, or null when they ran out. */
  #exchange(payload: Buffer, r: NsReport): Promise<string | null> {
    const token = randomBytes(4);
    const mid = (this.#mid = (this.#mid + 1) & 0xffff);
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
      let timeout = this.c.ackTimeoutMs * (1 + Math.random() * (ACK_RANDOM_FACTOR - 1));
      const e = {
        mid,
        acked: false,
        done: (code: string | null) => {
          clearTimeout(timer);
          this.#waiting.delete(token.toString('hex'));
          resolve(code);
        },
      };
      const retransmit = () => {
        if (e.acked) {
          timer = setTimeout(() => e.done(null), 30_000);
          return;
        }
        if (sent === MAX_RETRANSMIT) return e.done(null);
        sent++;
        r.retransmissions++;
        this.#send(datagram);
        timeout *= 2;
        timer = setTimeout(retransmit, timeout);
      };
      this.#waiting.set(token.toString('hex'), e);
      this.#send(datagram);
      timer = setTimeout(retransmit, timeout);
    });
  }

  async report(n: number): Promise<NsReport> {
    const r: NsReport = { device: this.index, n, sentAt: Date.now(), answeredAt: null, code: null, retransmissions: 0 };
    const payload = Buffer.from(JSON.stringify({ d: this.index, seq: n }));
    for (;;) {
      const code = await this.#exchange(payload, r);
      if (this.#closed) return r;
      if (code === null) {
        this.unanswered++;
        // a new handshake, tried again until one succeeds (the node it reaches may be gone too)
        while (
          !this.#closed &&
          !(await this.connect().then(
            () => true,
            () => false,
          ))
        )
          await new Promise((res) => setTimeout(res, this.c.ackTimeoutMs));
        continue;
      }
      r.code = code;
      r.answeredAt = Date.now();
      return r;
    }
  }

  close(): void {
    this.#closed = true;
    for (const e of this.#waiting.values()) e.done(null);
    this.#link?.close();
  }
}

const say = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);

async function main(): Promise<void> {
  const c = JSON.parse(readFileSync(process.argv[2], 'utf8')) as NsDevicesConfig;
  const devices = c.devices.map((d, i) => new Device(i, c, d));
  for (let i = 0; i < devices.length; i += 10) await Promise.all(devices.slice(i, i + 10).map((d) => d.connect()));
  let stopped = false;
  const stop = new Promise<void>((resolve) =>
    createInterface({ input: process.stdin }).on('line', (l) => {
      if (l.trim() === 'stop') resolve();
    }),
  );
  void stop.then(() => {
    stopped = true;
  });
  const records: NsReport[] = [];
  let next = c.firstNumber;
  say({ event: 'ready', ports: devices.map((d) => d.localPort) });
  const progress = setInterval(() => say({ event: 'progress', answered: records.filter((r) => r.answeredAt !== null).length }), 250);
  await Promise.all(
    devices.map(async (device) => {
      await new Promise((res) => setTimeout(res, Math.random() * c.periodMs));
      while (!stopped) {
        const started = Date.now();
        const r = await device.report(next++);
        if (r.answeredAt !== null || !stopped) records.push(r);
        await new Promise((res) => setTimeout(res, Math.max(0, started + c.periodMs - Date.now())));
      }
    }),
  );
  clearInterval(progress);
  const counts = devices.map((d): NsDeviceCounts => ({
    index: d.index,
    cid: d.d.cid,
    handshakes: d.handshakes,
    unanswered: d.unanswered,
    localPort: d.localPort,
  }));
  for (const d of devices) d.close();
  // stdout is a pipe: exit once the last line is written, not before
  process.stdout.write(`${JSON.stringify({ event: 'done', records, devices: counts })}\n`, () => process.exit(0));
}

await main();
