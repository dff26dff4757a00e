/** Test helpers: a DTLS echo server on 127.0.0.1:0 and an openssl s_client -dtls1_2 runner. */
import dgram from 'node:dgram';
import { once } from 'node:events';
import { spawn } from 'node:child_process';
import { afterEach } from 'vitest';
import { createDtlsServer } from '../../src/dtls/server.ts';
import { RawPeer, clientHello, clientHelloDatagram } from './raw-client.ts';
import type { CidClient } from '../support/cid-client/client.ts';
import type { DtlsServer, DtlsServerOptions, DtlsSession, HandshakeErrorInfo } from '../../src/dtls/server.ts';
import { waitFor } from '../support/until.ts';

/** Waits until a condition holds (test/support/until.ts). */
export { waitFor };

export const PSK_HEX = '00112233445566778899aabbccddeeff';
export const IDENTITY = 'device-1';

export interface EchoServer {
  server: DtlsServer;
  port: number;
  sessions: DtlsSession[];
  errors: Array<{ err: Error; info: HandshakeErrorInfo }>;
  /** Every datagram the server sent, in order. */
  sent: Buffer[];
  /** Every datagram the server received, in order. */
  received: Buffer[];
  /** Application data the sessions delivered, as strings. */
  data: string[];
}

/** A server that answers every application record with `echo:` + the data (on UDP `port`, default any free one). */
export async function startEchoServer(opts: Partial<DtlsServerOptions> = {}, port = 0): Promise<EchoServer> {
  const socket = dgram.createSocket('udp4');
  const sent: Buffer[] = [];
  const send = socket.send.bind(socket) as (...args: unknown[]) => void;
  (socket as unknown as { send: (...args: unknown[]) => void }).send = (...args: unknown[]) => {
    if (Buffer.isBuffer(args[0])) sent.push(Buffer.from(args[0]));
    send(...args);
  };
  const received: Buffer[] = [];
  socket.on('message', (d) => received.push(d));
  socket.bind(port, '127.0.0.1');
  await once(socket, 'listening');
  const server = createDtlsServer({
    socket,
    lookupPsk: async (identity) => (identity === IDENTITY ? Buffer.from(PSK_HEX, 'hex') : null),
    ...opts,
  });
  const result: EchoServer = { server, port: server.address().port, sessions: [], errors: [], sent, received, data: [] };
  server.on('session', (s: DtlsSession) => {
    result.sessions.push(s);
    s.on('data', (d: Buffer) => result.data.push(d.toString()));
    s.on('data', (d: Buffer) => s.send(Buffer.concat([Buffer.from('echo:'), d])));
  });
  server.on('handshakeError', (err: Error, info: HandshakeErrorInfo) => result.errors.push({ err, info }));
  return result;
}

export interface DtlsClientResult {
  stdout: string;
  stderr: string;
  /** True when the expected echo appeared on stdout. */
  echoed: boolean;
}

/**
 * Runs `openssl s_client -dtls1_2 -quiet`, writes `line`, and ends the process as soon as `echo:<line>` shows on
 * stdout, or when it exits by itself, or after `timeoutMs`.
 */
export function dtlsClient(o: {
  port: number;
  cipher: string;
  identity?: string;
  pskHex?: string;
  line?: string;
  extraArgs?: string[];
  timeoutMs?: number;
  /** More lines, each written once the previous one came back; `onEcho(i)` runs before line i+1 is written. */
  moreLines?: string[];
  onEcho?: (i: number) => void | Promise<void>;
  /** After the echo, end stdin instead of killing: without -quiet, s_client then sends close_notify and exits. */
  closeNotify?: boolean;
}): Promise<DtlsClientResult> {
  const line = o.line ?? 'hello dtls';
  const child = spawn('openssl', [
    's_client',
    '-dtls1_2',
    '-connect',
    `127.0.0.1:${o.port}`,
    '-psk',
    o.pskHex ?? PSK_HEX,
    '-psk_identity',
    o.identity ?? IDENTITY,
    '-cipher',
    o.cipher,
    ...(o.closeNotify ? [] : ['-quiet']),
    ...(o.extraArgs ?? []),
  ]);
  let stdout = '';
  let stderr = '';
  let echoed = false;
  const lines = [line, ...(o.moreLines ?? [])];
  let waiting = 0;
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    if (echoed || waiting < 0 || !stdout.includes(`echo:${lines[waiting]}\n`)) return;
    const i = waiting;
    waiting = -1; // until onEcho settles
    void Promise.resolve(o.onEcho?.(i)).then(() => {
      if (i + 1 < lines.length) {
        waiting = i + 1;
        child.stdin.write(`${lines[i + 1]}\n`);
        return;
      }
      echoed = true;
      if (o.closeNotify) child.stdin.end();
      else child.kill('SIGTERM');
    });
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdin.on('error', () => {});
  // s_client reads stdin only once the handshake is done; a line written now waits in the pipe.
  child.stdin.write(`${line}\n`);
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 10_000);
  return new Promise((resolve) => {
    child.on('close', () => {
      clearTimeout(timer);
      resolve({ stdout, stderr, echoed });
    });
  });
}

export interface GnutlsResult {
  stdout: string;
  stderr: string;
  /** True when `echo:<line>` came back. */
  echoed: boolean;
}

/**
 * Runs `gnutls-cli --udp` against the server, writes `line` once the handshake is done (gnutls-cli reads stdin in
 * its "Simple Client Mode"), ends stdin once `echo:<line>` shows (gnutls-cli then sends close_notify), or kills it
 * after `timeoutMs`.
 */
export function gnutlsClient(o: { port: number; args: string[]; line?: string; timeoutMs?: number }): Promise<GnutlsResult> {
  const line = o.line ?? 'hello gnutls';
  const child = spawn('gnutls-cli', ['--udp', '-p', String(o.port), ...o.args, '127.0.0.1']);
  let stdout = '';
  let stderr = '';
  let echoed = false;
  let written = false;
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d;
    if (!written && stdout.includes('Simple Client Mode')) {
      written = true;
      child.stdin.write(`${line}\n`);
    }
    if (!echoed && stdout.includes(`echo:${line}\n`)) {
      echoed = true;
      child.stdin.end();
    }
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  child.stdin.on('error', () => {});
  const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 10_000);
  return new Promise((resolve) => {
    child.on('close', () => {
      clearTimeout(timer);
      resolve({ stdout, stderr, echoed });
    });
  });
}

/** What a test starts (one echo server, raw peers, CID clients), closed after each test of the file that calls this once. */
export function perTest(): { srv: EchoServer | undefined; peers: RawPeer[]; cidClients: CidClient[] } {
  const started: { srv: EchoServer | undefined; peers: RawPeer[]; cidClients: CidClient[] } = { srv: undefined, peers: [], cidClients: [] };
  afterEach(async () => {
    await started.srv?.server.close();
    started.srv = undefined;
    for (const p of started.peers.splice(0)) p.close();
    for (const c of started.cidClients.splice(0)) c.close();
  });
  return started;
}

/**
 * A cookie exchange from `address`, then ClientHello 2, and nothing more (the handshake stalls after the server's
 * flight 4): true when a ServerHello came within `ms`. The peer goes to `peers` (closed after the test).
 */
export async function serverHelloAfterCookie(peers: RawPeer[], port: number, address: string, ms: number): Promise<boolean> {
  const p = await new RawPeer(port).open(address);
  peers.push(p);
  const ch = clientHello();
  p.send(clientHelloDatagram(ch, 0, 0));
  await waitFor(() => p.received.length > 0);
  const cookie = p.received.shift()!.fragments[0].body.subarray(3);
  p.send(clientHelloDatagram({ ...ch, cookie }, 1, 1));
  try {
    await p.take((d) => d.fragments.some((f) => f.type === 2), ms);
    return true;
  } catch {
    return false;
  }
}
