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
import type { DtlsServer } from '../server.ts';
import type { CidRouter } from './hand-over.ts';
import type { Relay } from '../migration.ts';
import { cidNode, nodeCid, recordCid } from './cid.ts';
import { Batch, datagramBytes, DEFAULT_BATCH_BYTES, DEFAULT_BATCH_WINDOW_MS, MessageKind, messageBytes, openMessages, sealSingle } from './messages.ts';
import type { MessageVisitor } from './messages.ts';
import type { NodeAddress, NodeDirectory } from './directory.ts';

export interface DtlsClusterOptions {
  log: Logger;
  /** the cluster's directory of nodes, given this node's inter-node address once its port is bound */
  directory: (self: NodeAddress) => NodeDirectory;
  /** MAC key of the inter-node messages (derived from SECRET_KEY: every node of a deployment has the same) */
  key: KeyObject;
  /** the inter-node port: bound on `address`, which the other nodes reach it at */
  address: string;
  port: number;
  /**
   * Largest inter-node datagram the messages bound for one peer within one event-loop turn are coalesced into
   * (DEFAULT_BATCH_BYTES); a message larger than that goes alone. 0: every message alone, at once.
   */
  batchBytes?: number;
  /**
   * Under load (a message within this long after the previous inter-node datagram left), a batch waits this long for
   * more (DEFAULT_BATCH_WINDOW_MS); otherwise it leaves at the end of the event-loop turn. 0: always at the end of the turn.
   */
  batchWindowMs?: number;
  /** what becomes of forwarded and dropped records, for metrics */
  count?: (event: ClusterEvent) => void;
  /**
   * The CID's node is gone, or it is this node and no session holds the CID: true when the session was taken over
   * (e.g. from sealed state the node that held it left behind) and the datagram handled. Without it: dropped.
   */
  takeOverSession?: (cid: Buffer, datagram: Buffer, from: { address: string; port: number }) => boolean | Promise<boolean>;
}

/** The messages bound for one peer node not yet sent, and where that node was last known to be. */
interface Outgoing {
  batch: Batch;
  to: NodeAddress;
}

/** forwarded / relayed answers, each way; and the reasons a record or message was dropped */
export type ClusterEvent = 'forwarded_out' | 'forwarded_in' | 'answer_out' | 'answer_in' | 'unknown_node' | 'no_session' | 'unauthenticated' | 'send_failed';

export class DtlsClusterNode implements CidRouter {
  readonly registry: NodeDirectory;
  readonly socket: dgram.Socket;
  readonly #o: DtlsClusterOptions;
  readonly #dtls: DtlsServer;
  /** One relay per peer node (answers to devices whose records that node forwarded), so a session holds no closure of its own. */
  readonly #relays = new Map<number, Relay>();
  /** By peer node id. */
  readonly #outgoing = new Map<number, Outgoing>();
  readonly #batchBytes: number;
  readonly #batchWindowMs: number;
  #flushing: NodeJS.Immediate | NodeJS.Timeout | null = null;
  /** performance.now() when the batches last left */
  #flushedAt = -Infinity;
  #closed = false;
  /** Inter-node datagrams and the messages in them this node sent (messages / datagrams: how well they coalesce). */
  readonly sent = { datagrams: 0, messages: 0 };

  private constructor(o: DtlsClusterOptions, dtls: DtlsServer, socket: dgram.Socket) {
    this.#o = o;
    this.#dtls = dtls;
    this.socket = socket;
    this.#batchBytes = o.batchBytes ?? DEFAULT_BATCH_BYTES;
    this.#batchWindowMs = o.batchWindowMs ?? DEFAULT_BATCH_WINDOW_MS;
    this.registry = o.directory({ address: o.address, port: socket.address().port });
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
    else
      this.#toNode(
        owner,
        (to) => this.#send(owner, to, MessageKind.forward, from.address, from.port, datagram, 'forwarded_out'),
        () => this.#ownerGone(cid, datagram, from, 'unknown_node'),
      );
  }

  /** Forwards a device's datagram to live node `id` (not this one): false when the directory does not know it. */
  forwardTo(id: number, datagram: Buffer, from: { address: string; port: number }): boolean {
    const to = id === this.registry.nodeId ? undefined : this.registry.peer(id);
    if (to) this.#send(id, to, MessageKind.forward, from.address, from.port, datagram, 'forwarded_out');
    return to !== undefined;
  }

  /** The live peer node whose relay `relay` is (the node a session's newest records came through), or undefined. */
  relayNode(relay: Relay | undefined): number | undefined {
    if (relay === undefined) return undefined;
    for (const [id, r] of this.#relays) if (r === relay) return this.registry.peer(id) ? id : undefined;
    return undefined;
  }

  /** Gives the node id back and closes the inter-node port (the DTLS server is closed by its owner). */
  async close(): Promise<void> {
    this.#flush(); // what waits for company goes now (the timer that would have sent it finds nothing)
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
    void Promise.resolve(this.#o.takeOverSession(cid, datagram, from)).then(
      (taken) => {
        if (!taken) this.#o.count?.(reason);
      },
      (err: Error) => {
        this.#o.count?.(reason);
        this.#o.log.warn({ err: err.message }, 'dtls cluster: session takeover failed; record dropped');
      },
    );
  }

  /** Calls `send` with node `id`'s address: known, or read from the directory (a node that joined since the last read). */
  #toNode(id: number, send: (to: NodeAddress) => void, gone: () => void): void {
    const known = this.registry.peer(id);
    if (known) send(known);
    else void this.registry.lookup(id).then((peer) => (peer ? send(peer) : gone()));
  }

  /**
   * Adds a message to peer `id`'s batch, sent at the end of this event-loop turn (setImmediate: after every datagram
   * the poll phase read) or, under load (the previous batches left less than the window ago), when the window is over;
   * at once when the next message would not fit. So under load a datagram carries the messages of a window, and a
   * message that comes alone waits for nothing. A message that fits no batch goes alone.
   */
  #send(id: number, to: NodeAddress, kind: MessageKind, address: string, port: number, datagram: Buffer, event: ClusterEvent): void {
    if (this.#closed) return; // sessions closing after this node left: their close_notify has no way out
    if (!to.batches) {
      // a node of the version before batches (a rolling deploy between the two): one message a datagram, at once
      this.socket.send(sealSingle(this.#o.key, this.registry.nodeId, { kind, address, port, datagram }), to.port, to.address);
      this.sent.datagrams++;
      this.sent.messages++;
      this.#o.count?.(event);
      return;
    }
    let out = this.#outgoing.get(id);
    if (!out) this.#outgoing.set(id, (out = { batch: new Batch(this.#batchBytes), to }));
    const bytes = messageBytes(address, datagram);
    if (!out.batch.fits(bytes)) {
      this.#flushTo(out);
      if (!out.batch.fits(bytes)) {
        const alone = new Batch(datagramBytes(bytes));
        alone.add(kind, address, port, datagram);
        this.#flushTo({ batch: alone, to });
        this.#o.count?.(event);
        return;
      }
    }
    out.to = to; // the newest address the directory gave (a node that restarted elsewhere)
    out.batch.add(kind, address, port, datagram);
    this.#o.count?.(event);
    if (this.#flushing) return;
    this.#flushing =
      this.#batchWindowMs > 0 && performance.now() - this.#flushedAt < this.#batchWindowMs
        ? setTimeout(this.#flush, this.#batchWindowMs)
        : setImmediate(this.#flush);
  }

  readonly #flush = (): void => {
    this.#flushing = null;
    this.#flushedAt = performance.now();
    for (const out of this.#outgoing.values()) this.#flushTo(out);
  };

  /** No callback per datagram (it costs a few µs each): a send that fails is counted from the socket's 'error' event. */
  #flushTo(out: Outgoing): void {
    const n = out.batch.count;
    if (n === 0 || this.#closed) return;
    this.socket.send(out.batch.seal(this.#o.key, this.registry.nodeId), out.to.port, out.to.address);
    this.sent.datagrams++;
    this.sent.messages += n;
  }

  #onMessage(b: Buffer, rinfo: dgram.RemoteInfo): void {
    if (openMessages(this.#o.key, b, this.#onEach) === null) {
      this.#o.count?.('unauthenticated');
      this.#o.log.debug({ from: `${rinfo.address}:${rinfo.port}` }, 'dtls cluster: unauthenticated message dropped');
    }
  }

  /** One message of an authentic datagram; the datagram's records are all handled in this turn, in their order. */
  readonly #onEach: MessageVisitor = (kind, node, address, port, datagram) => {
    if (kind === MessageKind.answer) {
      this.#o.count?.('answer_in');
      try {
        this.#dtls.socket.send(datagram, port, address);
      } catch {
        this.#o.count?.('send_failed'); // the DTLS socket closed (shutting down)
      }
      return;
    }
    this.#o.count?.('forwarded_in');
    if (!this.#dtls.receiveRelayed(datagram, { address, port, relay: this.#relayTo(node) })) {
      this.#ownerGone(recordCid(datagram), datagram, { address, port }, 'no_session');
    }
  };

  /** Answers for devices whose records node `id` forwarded: back to that node, at the address the directory has for it. */
  #relayTo(id: number): Relay {
    let relay = this.#relays.get(id);
    if (!relay) {
      relay = (datagram, address, port) =>
        this.#toNode(
          id,
          (via) => this.#send(id, via, MessageKind.answer, address, port, datagram, 'answer_out'),
          () => this.#o.count?.('unknown_node'),
        );
      this.#relays.set(id, relay);
    }
    return relay;
  }
}
