/**
 * One gateway node of a CID-routed cluster. Its DTLS server issues CIDs that name this node (cid.ts); a tls12_cid
 * record whose CID names another live node is forwarded to that node's inter-node port with the device's address
 * (messages.ts, authenticated), processed there as if it had come from that address, and the answer comes back here
 * to leave from the socket the device's datagram arrived on. So any L4 UDP balancer can sit in front: round robin, a
 * hash of the source, a NAT that changes the device's port mid-session.
 *
 * A record whose CID names no live node, or this node without such a session, goes to `takeOverSession` (sealed
 * session state carried over from a node that is gone); without it, or when it declines, the record is dropped:
 * the device's retransmissions run out and it handshakes again, on whichever node the balancer picks.
 */
import dgram from 'node:dgram';
import type { KeyObject } from 'node:crypto';
import type { Logger } from '../../app/logger.ts';
import type { Redis } from '../../app/redis.ts';
import type { CidRouter, DtlsServer } from '../server.ts';
import type { Relay } from '../session.ts';
import { cidNode, nodeCid, recordCid } from './cid.ts';
import { MessageKind, openMessage, sealMessage } from './messages.ts';
import type { ClusterMessage } from './messages.ts';
import { NodeRegistry } from './registry.ts';
import type { NodeAddress } from './registry.ts';

export interface DtlsClusterOptions {
  redis: Redis;
  log: Logger;
  /** names this deployment's keys in Redis (QUEUE_NAME) */
  deployment: string;
  /** MAC key of the inter-node messages (derived from SECRET_KEY: every node of a deployment has the same) */
  key: KeyObject;
  /** the inter-node port: bound on `address`, which the other nodes reach it at */
  address: string;
  port: number;
  /** node id lease in Redis (renewed every third of it) */
  leaseMs: number;
  /** what becomes of forwarded and dropped records, for metrics */
  count?: (event: ClusterEvent) => void;
  /**
   * The CID's node is gone, or it is this node and no session holds the CID: true when the session was taken over
   * (e.g. from sealed state the node that held it left behind) and the datagram handled. Without it: dropped.
   */
  takeOverSession?: (cid: Buffer, datagram: Buffer, from: { address: string; port: number }) => boolean | Promise<boolean>;
}

/** forwarded / relayed answers, each way; and the reasons a record or message was dropped */
export type ClusterEvent =
  | 'forwarded_out' | 'forwarded_in' | 'answer_out' | 'answer_in'
  | 'unknown_node' | 'no_session' | 'unauthenticated' | 'send_failed';

export class DtlsClusterNode implements CidRouter {
  readonly registry: NodeRegistry;
  readonly socket: dgram.Socket;
  readonly #o: DtlsClusterOptions;
  readonly #dtls: DtlsServer;
  /** One relay per peer node (answers to devices whose records that node forwarded), so a session holds no closure of its own. */
  readonly #relays = new Map<number, Relay>();
  #closed = false;

  private constructor(o: DtlsClusterOptions, dtls: DtlsServer, socket: dgram.Socket) {
    this.#o = o;
    this.#dtls = dtls;
    this.socket = socket;
    this.registry = new NodeRegistry(o.redis, o.log, o.deployment, { address: o.address, port: socket.address().port }, o.leaseMs);
  }

  /** Binds the inter-node port, leases a node id, and makes `dtls` issue CIDs naming it and route the others'. */
  static async start(o: DtlsClusterOptions, dtls: DtlsServer): Promise<DtlsClusterNode> {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(o.port, o.address, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    const node = new DtlsClusterNode(o, dtls, socket);
    try {
      await node.registry.join();
    } catch (err) {
      socket.close();
      throw err;
    }
    socket.on('message', (b, rinfo) => node.#onMessage(b, rinfo));
    socket.on('error', (err) => {
      o.count?.('send_failed');
      o.log.warn({ err: err.message }, 'dtls cluster socket error');
    });
    dtls.routeCids(node);
    return node;
  }

  get nodeId(): number {
    return this.registry.nodeId;
  }

  newCid(): Buffer {
    return nodeCid(this.registry.nodeId);
  }

  unclaimed(cid: Buffer, datagram: Buffer, from: { address: string; port: number }): void {
    const owner = cidNode(cid);
    if (owner === this.registry.nodeId) this.#ownerGone(cid, datagram, from, 'no_session');
    else this.#toNode(owner, (to) => this.#forward(to, datagram, from), () => this.#ownerGone(cid, datagram, from, 'unknown_node'));
  }

  /** Forwards a device's datagram to live node `id` (not this one): false when the directory does not know it. */
  forwardTo(id: number, datagram: Buffer, from: { address: string; port: number }): boolean {
    const to = id === this.registry.nodeId ? undefined : this.registry.peer(id);
    if (to) this.#forward(to, datagram, from);
    return to !== undefined;
  }

  /** Gives the node id back and closes the inter-node port (the DTLS server is closed by its owner). */
  async close(): Promise<void> {
    this.#closed = true;
    await this.registry.leave();
    await new Promise<void>((resolve) => this.socket.close(() => resolve()));
  }

  /**
   * The hook where "the CID's node is gone" is decided: a session takeover may claim the record; otherwise it is
   * dropped, as RFC 9146 drops a record of an unknown CID, and the device handshakes again once its retries run out.
   */
  #ownerGone(cid: Buffer, datagram: Buffer, from: { address: string; port: number }, reason: 'unknown_node' | 'no_session'): void {
    if (!this.#o.takeOverSession) {
      this.#o.count?.(reason);
      return;
    }
    void Promise.resolve(this.#o.takeOverSession(cid, datagram, from)).then((taken) => {
      if (!taken) this.#o.count?.(reason);
    }, (err: Error) => {
      this.#o.count?.(reason);
      this.#o.log.warn({ err: err.message }, 'dtls cluster: session takeover failed; record dropped');
    });
  }

  /** Calls `send` with node `id`'s address: known, or read from the directory (a node that joined since the last read). */
  #toNode(id: number, send: (to: NodeAddress) => void, gone: () => void): void {
    const known = this.registry.peer(id);
    if (known) send(known);
    else void this.registry.lookup(id).then((peer) => (peer ? send(peer) : gone()));
  }

  #forward(to: NodeAddress, datagram: Buffer, from: { address: string; port: number }): void {
    this.#send({ kind: MessageKind.forward, node: this.registry.nodeId, address: from.address, port: from.port, datagram }, to, 'forwarded_out');
  }

  /** No callback per datagram (it costs a few µs each): a send that fails is counted from the socket's 'error' event. */
  #send(m: ClusterMessage, to: NodeAddress, event: ClusterEvent): void {
    if (this.#closed) return; // sessions closing after this node left: their close_notify has no way out
    this.socket.send(sealMessage(this.#o.key, m), to.port, to.address);
    this.#o.count?.(event);
  }

  #onMessage(b: Buffer, rinfo: dgram.RemoteInfo): void {
    const m = openMessage(this.#o.key, b);
    if (!m) {
      this.#o.count?.('unauthenticated');
      this.#o.log.debug({ from: `${rinfo.address}:${rinfo.port}` }, 'dtls cluster: unauthenticated message dropped');
      return;
    }
    if (m.kind === MessageKind.answer) {
      this.#o.count?.('answer_in');
      try {
        this.#dtls.socket.send(m.datagram, m.port, m.address);
      } catch {
        this.#o.count?.('send_failed'); // the DTLS socket closed (shutting down)
      }
      return;
    }
    this.#o.count?.('forwarded_in');
    const relay = this.#relayTo(m.node);
    const from = { address: m.address, port: m.port };
    if (!this.#dtls.receiveRelayed(m.datagram, { ...from, relay })) {
      this.#ownerGone(recordCid(m.datagram), m.datagram, from, 'no_session');
    }
  }

  /** Answers for devices whose records node `id` forwarded: back to that node, at the address the directory has for it. */
  #relayTo(id: number): Relay {
    let relay = this.#relays.get(id);
    if (!relay) {
      relay = (datagram, address, port) => this.#toNode(
        id,
        (via) => this.#send({ kind: MessageKind.answer, node: this.registry.nodeId, address, port, datagram }, via, 'answer_out'),
        () => this.#o.count?.('unknown_node'),
      );
      this.#relays.set(id, relay);
    }
    return relay;
  }
}
