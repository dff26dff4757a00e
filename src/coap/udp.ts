/**
 * Plain CoAP over a UDP socket: one CoapEndpoint per peer address:port, the peers bounded and forgotten when idle.
 * A source address on plain UDP proves nothing, so a peer keeps state only once one of its requests was admitted
 * (its endpoint is dropped again right after a datagram that left nothing behind), and its endpoint is told
 * its peer is unproven (refusals no larger than the request).
 */
import type dgram from 'node:dgram';
import { EventEmitter } from 'node:events';
import type { CoapConfig } from './config.ts';
import { COAP_DEFAULTS, SYSTEM_CLOCK } from './config.ts';
import { UploadBudget } from './block.ts';
import { DedupLimit } from './dedup.ts';
import { CoapEndpoint } from './endpoint.ts';
import type { CoapEndpointOptions, CoapRequest, CoapResponse } from './endpoint.ts';

export interface UdpPeer {
  address: string;
  port: number;
}

export interface CoapUdpServerOptions extends Partial<CoapConfig>, Pick<CoapEndpointOptions, 'diagnostic' | 'admit' | 'uploadOwner' | 'clock'> {
  socket: dgram.Socket;
  /** Bytes of unfinished Block1 uploads over all peers. Default: 64 uploads of `maxBodyBytes`. */
  uploadBudget?: UploadBudget;
  handler(request: CoapRequest, peer: UdpPeer): Promise<CoapResponse>;
  /** Peers with state at once; a datagram from a new peer beyond it evicts the longest-idle peer with nothing pending. Default 10 000. */
  maxPeers?: number;
}

interface Peer {
  endpoint: CoapEndpoint;
  lastSeen: number;
}

/**
 * Emits 'malformed' (reason, peer) like CoapEndpoint, and 'failure' (err, peer) when handling a datagram threw: the
 * datagram is dropped and the listener carries on (an exception in a socket's listener would end the process).
 */
export class CoapUdpServer extends EventEmitter {
  readonly #socket: dgram.Socket;
  readonly #peers = new Map<string, Peer>();
  readonly #opts: CoapUdpServerOptions;
  readonly #sweep: NodeJS.Timeout;
  readonly #idleMs: number;
  readonly #budget: UploadBudget;
  readonly #dedupLimit: DedupLimit;

  constructor(opts: CoapUdpServerOptions) {
    super();
    this.#opts = opts;
    this.#budget = opts.uploadBudget ?? new UploadBudget(64 * (opts.maxBodyBytes ?? COAP_DEFAULTS.maxBodyBytes));
    this.#socket = opts.socket;
    this.#idleMs = opts.exchangeLifetimeMs ?? COAP_DEFAULTS.exchangeLifetimeMs;
    this.#dedupLimit = new DedupLimit(opts.maxDedupTotal ?? COAP_DEFAULTS.maxDedupTotal);
    this.#socket.on('message', this.#onMessage);
    this.#sweep = setInterval(() => this.#forgetIdle((this.#opts.clock ?? SYSTEM_CLOCK).now()), Math.min(this.#idleMs, 30_000));
    this.#sweep.unref();
  }

  get peerCount(): number {
    return this.#peers.size;
  }

  /** Message ids remembered for deduplication, over all peers (bounded by `maxDedupTotal`). */
  get remembered(): number {
    return this.#dedupLimit.size;
  }

  /** Handler calls running plus separate responses awaiting their ACK, over all peers. */
  get pending(): number {
    let n = 0;
    for (const p of this.#peers.values()) n += p.endpoint.pending;
    return n;
  }

  /** Forgets every peer; the socket is the caller's to close. */
  close(): void {
    clearInterval(this.#sweep);
    this.#socket.off('message', this.#onMessage);
    for (const p of this.#peers.values()) p.endpoint.close();
    this.#peers.clear();
  }

  #onMessage = (datagram: Buffer, rinfo: dgram.RemoteInfo): void => {
    try {
      this.#receive(datagram, rinfo);
    } catch (err) {
      this.emit('failure', err, { address: rinfo.address, port: rinfo.port });
    }
  };

  #receive(datagram: Buffer, rinfo: dgram.RemoteInfo): void {
    const key = `${rinfo.address}:${rinfo.port}`;
    const now = (this.#opts.clock ?? SYSTEM_CLOCK).now();
    let peer = this.#peers.get(key);
    if (!peer) {
      if (this.#peers.size >= (this.#opts.maxPeers ?? 10_000) && !this.#evictOne()) return;
      const address = { address: rinfo.address, port: rinfo.port };
      const { socket: _socket, handler, maxPeers: _maxPeers, ...config } = this.#opts;
      const endpoint = new CoapEndpoint({
        ...config,
        uploadBudget: this.#budget,
        dedupLimit: this.#dedupLimit,
        unprovenPeer: true,
        send: (d) => this.#socket.send(d, address.port, address.address),
        handler: (req) => handler(req, address),
      });
      endpoint.on('malformed', (reason: string) => this.emit('malformed', reason, address));
      endpoint.on('failure', (err: Error) => this.emit('failure', err, address));
      peer = { endpoint, lastSeen: now };
      this.#peers.set(key, peer);
    }
    peer.lastSeen = now;
    peer.endpoint.receive(datagram);
    if (peer.endpoint.idle) {
      peer.endpoint.close();
      this.#peers.delete(key);
    }
  }

  #evictOne(): boolean {
    let oldest: [string, Peer] | null = null;
    for (const entry of this.#peers) {
      if (entry[1].endpoint.pending === 0 && (!oldest || entry[1].lastSeen < oldest[1].lastSeen)) oldest = entry;
    }
    if (!oldest) return false;
    oldest[1].endpoint.close();
    this.#peers.delete(oldest[0]);
    return true;
  }

  #forgetIdle(now: number): void {
    for (const [key, p] of this.#peers) {
      if (p.endpoint.idle || (p.endpoint.pending === 0 && now - p.lastSeen > this.#idleMs)) {
        p.endpoint.close();
        this.#peers.delete(key);
      }
    }
  }
}
