/** Test helpers: an openssl s_client runner and a minimal PSK client built on our own primitives (for framing tests). */
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import net from 'node:net';
import { once } from 'node:events';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { encodeClientHello, encodeClientKeyExchangePsk, encodeHandshake, findExtension, parseServerHello } from '../../src/tls/messages.ts';
import type { Extension, ServerHello } from '../../src/tls/messages.ts';
import { extendedMasterSecret, keyExpansion, masterSecret, pskPreMasterSecret, splitKeyBlock, verifyData } from '../../src/tls/prf.ts';
import { HandshakeReassembler, MAX_CIPHERTEXT_LENGTH, RecordReader, encodePlaintextRecord, writeRecordHeader } from '../../src/tls/record.ts';
import { cipherSuiteById, keyBlockLength } from '../../src/tls/suites/index.ts';
import type { RecordProtection } from '../../src/tls/suites/index.ts';

export function portOf(server: net.Server): number {
  return (server.address() as AddressInfo).port;
}

export interface SClientResult {
  stdout: string;
  stderr: string;
  code: number | null;
}

export interface SClientOptions {
  port: number;
  identity: string;
  pskHex: string;
  cipher: string;
  input?: string;
  extraArgs?: string[];
  env?: Record<string, string>;
  timeoutMs?: number;
  /** Protocol version flag, default -tls1_2. */
  version?: string;
  onSpawn?: (child: ChildProcessWithoutNullStreams) => void;
  /** Called with the accumulated stdout after every chunk; lets a test drive a conversation. */
  onStdout?: (stdout: string, child: ChildProcessWithoutNullStreams) => void;
}

export function sClient(o: SClientOptions): Promise<SClientResult> {
  const args = [
    's_client',
    '-connect',
    `127.0.0.1:${o.port}`,
    o.version ?? '-tls1_2',
    '-psk',
    o.pskHex,
    '-psk_identity',
    o.identity,
    '-cipher',
    o.cipher,
    '-quiet',
    ...(o.extraArgs ?? []),
  ];
  const child = spawn('openssl', args, { env: { ...process.env, ...o.env } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    o.onStdout?.(stdout, child);
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  o.onSpawn?.(child);
  if (o.input !== undefined) child.stdin.end(o.input);
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 10_000);
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
  });
}

export function bodies(stdout: string): string[] {
  return [...stdout.matchAll(/BODY<([^>]*)>/g)].map((m) => m[1]);
}

// ---- minimal PSK client on our primitives --------------------------------------------------------------------------

export interface Rec {
  type: number;
  data: Buffer;
}

export interface ClientOptions {
  identity: string;
  psk: Buffer;
  suites?: number[];
  ems?: boolean;
  /** Split handshake messages into records of at most this many bytes (0 = one message per record). */
  fragment?: number;
  /** Send the client's second flight (CKE, CCS, Finished) in one TCP write. */
  coalesce?: boolean;
  extraExtensions?: Extension[];
}

export class TestClient {
  readonly socket: net.Socket;
  private readonly reader = new RecordReader();
  private readonly queue: Rec[] = [];
  private waiter: (() => void) | null = null;
  private closed = false;
  private readProt: RecordProtection | null = null;
  private writeProt: RecordProtection | null = null;
  private rseq = 0;
  private wseq = 0;
  serverHello: ServerHello | undefined;

  constructor(socket: net.Socket) {
    this.socket = socket;
    this.reader.maxFragmentLength = MAX_CIPHERTEXT_LENGTH;
    socket.on('data', (c: Buffer) => {
      this.reader.push(c);
      while (this.reader.next()) this.queue.push({ type: this.reader.type, data: Buffer.from(this.reader.fragment) });
      this.waiter?.();
    });
    socket.on('close', () => {
      this.closed = true;
      this.waiter?.();
    });
    socket.on('error', () => {});
  }

  static async connect(port: number): Promise<TestClient> {
    const s = net.connect(port, '127.0.0.1');
    await once(s, 'connect');
    return new TestClient(s);
  }

  private seq(n: number): Buffer {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(BigInt(n));
    return b;
  }

  /** Next record, decrypted if read protection is on. Rejects if the connection closes first. */
  async recv(): Promise<Rec> {
    while (this.queue.length === 0) {
      if (this.closed) throw new Error('connection closed');
      await new Promise<void>((r) => (this.waiter = r));
      this.waiter = null;
    }
    const rec = this.queue.shift()!;
    if (!this.readProt) return rec;
    return { type: rec.type, data: this.readProt.open(this.seq(this.rseq++), rec.type, 0x0303, rec.data) };
  }

  /** Encodes (and protects, once keys are on) records carrying `data`, split into `fragment`-sized pieces. */
  encode(type: number, data: Buffer, fragment = 0): Buffer[] {
    const size = fragment > 0 ? fragment : Math.max(data.length, 1);
    const out: Buffer[] = [];
    for (let o = 0; o < data.length || (o === 0 && data.length === 0); o += size) {
      const piece = data.subarray(o, o + size);
      if (!this.writeProt) out.push(encodePlaintextRecord(type, 0x0303, piece));
      else {
        const r = this.writeProt.seal(this.seq(this.wseq++), type, 0x0303, piece, 5);
        writeRecordHeader(r, 0, type, 0x0303, r.length - 5);
        out.push(r);
      }
      if (data.length === 0) break;
    }
    return out;
  }

  send(type: number, data: Buffer, fragment = 0): void {
    for (const r of this.encode(type, data, fragment)) this.socket.write(r);
  }

  async handshake(o: ClientOptions): Promise<void> {
    const transcript = createHash('sha256');
    const clientRandom = randomBytes(32);
    const exts: Extension[] = [...(o.extraExtensions ?? [])];
    if (o.ems !== false) exts.push({ type: 23, data: Buffer.alloc(0) });
    const ch = encodeHandshake(
      1,
      encodeClientHello({
        clientVersion: 0x0303,
        random: clientRandom,
        sessionId: Buffer.alloc(0),
        cipherSuites: [...(o.suites ?? [0xc0a8]), 0x00ff],
        compressionMethods: Buffer.from([0]),
        extensions: exts,
      }),
    );
    transcript.update(ch);
    this.send(22, ch, o.fragment);
    const hs = new HandshakeReassembler();
    for (;;) {
      const msg = hs.next();
      if (!msg) {
        const rec = await this.recv();
        if (rec.type === 21) throw new Error(`alert ${rec.data[1]}`);
        hs.push(rec.data);
        continue;
      }
      transcript.update(msg.raw);
      if (msg.type === 2) this.serverHello = parseServerHello(msg.body);
      if (msg.type === 14) break;
    }
    const sh = this.serverHello!;
    const suite = cipherSuiteById(sh.cipherSuite)!;
    const cke = encodeHandshake(16, encodeClientKeyExchangePsk(Buffer.from(o.identity)));
    transcript.update(cke);
    const pre = pskPreMasterSecret(o.psk);
    const ems = findExtension(sh.extensions, 23) !== undefined;
    const master = ems ? extendedMasterSecret(pre, transcript.copy().digest()) : masterSecret(pre, clientRandom, sh.random);
    const k = splitKeyBlock(keyExpansion(master, sh.random, clientRandom, keyBlockLength(suite)), suite.macKeyLength, suite.encKeyLength, suite.fixedIvLength);
    const flight: Buffer[] = [];
    flight.push(...this.encode(22, cke, o.fragment));
    flight.push(...this.encode(20, Buffer.from([1])));
    this.writeProt = suite.createProtection(k.clientMacKey, k.clientKey, k.clientIv);
    const fin = encodeHandshake(20, verifyData(master, 'client', transcript.copy().digest()));
    transcript.update(fin);
    flight.push(...this.encode(22, fin, o.fragment));
    if (o.coalesce) this.socket.write(Buffer.concat(flight));
    else for (const r of flight) this.socket.write(r);
    const ccs = await this.recv();
    if (ccs.type !== 20) throw new Error(ccs.type === 21 ? `alert ${ccs.data[1]}` : `expected CCS, got ${ccs.type}`);
    this.readProt = suite.createProtection(k.serverMacKey, k.serverKey, k.serverIv);
    const sfin = await this.recv();
    const expected = encodeHandshake(20, verifyData(master, 'server', transcript.digest()));
    if (sfin.type !== 22 || !timingSafeEqual(sfin.data, expected)) throw new Error('bad server Finished');
  }

  waitClose(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return once(this.socket, 'close').then(() => undefined);
  }
}
