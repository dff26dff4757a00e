/**
 * How the nodes of a cluster find each other, with no hand-kept list: each node leases a node id in Redis
 * (`SET key value NX PX lease`, renewed every third of the lease by a heartbeat) under which it registers the address
 * of its inter-node port; every node reads the whole directory (one MGET) at each heartbeat, and at once when a CID
 * names a node it does not know yet. A node that stops heartbeating (crash, partition) loses its id when the lease runs
 * out; a node that stops gracefully gives it back at once.
 *
 * Keys (one hash tag, so one Redis Cluster slot and MGET works): `{<QUEUE_NAME>:dtls-cluster}:node:<id>`, value
 * `<address> <port> <instance> batches` (instance: random per process, so a renewal never extends another process's
 * lease; `batches`: this node reads batched inter-node datagrams. A node of the version before wrote no fourth word
 * and reads the first two only, so the two versions share one directory during a rolling deploy: messages.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../app/logger.ts';
import { OutageLog } from '../../app/outage-log.ts';
import type { Redis } from '../../app/redis.ts';
import { MAX_NODES } from './cid.ts';

export interface NodeAddress {
  address: string;
  port: number;
  /** the node reads batches (messages.ts); false: a node of the version before, sent one message a datagram */
  batches?: boolean;
}

/** PEXPIRE only while the key still holds our value; DEL likewise. */
const RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0";
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
/** A directory read because a CID named an unknown node waits at least this long after the previous read. */
const MIN_LOOKUP_INTERVAL_MS = 250;

export class NodeRegistry {
  readonly #redis: Redis;
  readonly #log: Logger;
  readonly #prefix: string;
  readonly #value: string;
  readonly #leaseMs: number;
  readonly #outage: OutageLog;
  #nodeId = -1;
  #nodes = new Map<number, NodeAddress>();
  #heartbeat: NodeJS.Timeout | null = null;
  #refreshing: Promise<void> | null = null;
  #lastRead = 0;
  #stopped = false;

  constructor(redis: Redis, log: Logger, deployment: string, self: NodeAddress, leaseMs: number) {
    this.#redis = redis;
    this.#log = log;
    this.#prefix = `{${deployment}:dtls-cluster}:node:`;
    this.#value = `${self.address} ${self.port} ${randomBytes(8).toString('hex')} batches`;
    this.#leaseMs = leaseMs;
    this.#outage = new OutageLog(log, 'dtls cluster: the node directory in Redis is unreachable; forwarding with the nodes known before', 'dtls cluster: the node directory in Redis is reachable again');
  }

  /** This node's id (valid after join). */
  get nodeId(): number {
    return this.#nodeId;
  }

  /** Live nodes as last read, this one included. */
  get nodes(): ReadonlyMap<number, NodeAddress> {
    return this.#nodes;
  }

  /** Leases a free node id (trying them from a random one on) and starts the heartbeat. */
  async join(): Promise<number> {
    this.#nodeId = await this.#lease(Math.floor(Math.random() * MAX_NODES));
    await this.#read();
    this.#schedule();
    return this.#nodeId;
  }

  /** The address of node `id`'s inter-node port; reads the directory again (at most every 250 ms) when it is unknown. */
  async lookup(id: number): Promise<NodeAddress | undefined> {
    const known = this.#nodes.get(id);
    if (known) return known;
    if (Date.now() - this.#lastRead >= MIN_LOOKUP_INTERVAL_MS) await this.#refresh();
    return this.#nodes.get(id);
  }

  /** Known without a Redis round trip. */
  peer(id: number): NodeAddress | undefined {
    return this.#nodes.get(id);
  }

  /** Stops the heartbeat and gives the node id back. */
  async leave(): Promise<void> {
    this.#stopped = true;
    if (this.#heartbeat) clearTimeout(this.#heartbeat);
    await this.#redis.eval(RELEASE, 1, this.#key(this.#nodeId), this.#value).catch(() => undefined);
  }

  #key(id: number): string {
    return `${this.#prefix}${id}`;
  }

  async #lease(first: number): Promise<number> {
    for (let i = 0; i < MAX_NODES; i++) {
      const id = (first + i) % MAX_NODES;
      if ((await this.#redis.set(this.#key(id), this.#value, 'PX', this.#leaseMs, 'NX')) === 'OK') return id;
    }
    throw new Error(`dtls cluster: all ${MAX_NODES} node ids are leased`);
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#heartbeat = setTimeout(() => void this.#beat().finally(() => this.#schedule()), Math.max(50, Math.floor(this.#leaseMs / 3)));
    this.#heartbeat.unref();
  }

  async #beat(): Promise<void> {
    try {
      const renewed = Number(await this.#redis.eval(RENEW, 1, this.#key(this.#nodeId), this.#value, this.#leaseMs));
      if (renewed !== 1 && !this.#stopped) {
        // the lease ran out (Redis was away longer than it): take the id again, or another one when someone took it
        const before = this.#nodeId;
        this.#nodeId = await this.#lease(before);
        if (this.#nodeId !== before) this.#log.error({ before, now: this.#nodeId }, 'dtls cluster: this node lost its node id; sessions under the old one are reached no more');
      }
      await this.#read();
      this.#outage.up();
    } catch (err) {
      this.#outage.down(err);
    }
  }

  #refresh(): Promise<void> {
    this.#refreshing ??= this.#read().catch((err: Error) => this.#outage.down(err)).finally(() => { this.#refreshing = null; });
    return this.#refreshing;
  }

  async #read(): Promise<void> {
    const ids = Array.from({ length: MAX_NODES }, (_, i) => i);
    const values = await this.#redis.mget(ids.map((id) => this.#key(id)));
    this.#lastRead = Date.now();
    const nodes = new Map<number, NodeAddress>();
    values.forEach((v, id) => {
      const [address, port, , batches] = v?.split(' ') ?? [];
      if (address && port) nodes.set(id, { address, port: Number(port), batches: batches === 'batches' });
    });
    this.#nodes = nodes;
  }
}
