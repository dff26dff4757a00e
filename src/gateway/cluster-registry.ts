/**
 * How the nodes of a cluster find each other, with no hand-kept list: each node leases a node id in Redis
 * (`SET key value NX PX lease`, renewed every third of the lease by a heartbeat) under which it registers the address
 * of its inter-node port; every node reads the whole directory (one MGET) at each heartbeat, and at once when a CID
 * names a node it does not know yet. A node that stops heartbeating (crash, partition) loses its id when the lease runs
 * out; a node that stops gracefully gives it back at once.
 *
 * Joins and leaves are announced on a pub/sub channel, and every node reads the directory again when it hears one:
 * a node that restarts comes back under another id and, with DTLS_CLUSTER_PORT=0, on another port, and the others
 * must not go on forwarding the records of its sessions to the address it left (into the void until their next
 * heartbeat) when they could claim those sessions from what it kept in Redis at once.
 *
 * Keys (one hash tag, so one Redis Cluster slot and MGET works): `{<QUEUE_NAME>:dtls-cluster}:node:<id>`, value
 * `<address> <port> <instance> batches` (instance: random per process, so a renewal never extends another process's
 * lease; `batches`: this node reads batched inter-node datagrams. A node of the version before wrote no fourth word
 * and reads the first two only, so the two versions share one directory during a rolling deploy: messages.ts).
 * Channel: `{<QUEUE_NAME>:dtls-cluster}:changes`, messages `<instance> join|leave <id>`.
 *
 * A node that dies without leaving (SIGKILL, out of memory) keeps its id until its lease runs out, and meanwhile the
 * others forward its sessions' records into the void. Whoever sees it die first (the fleet's supervisor, an
 * orchestrator's hook) gives its id back for it with `evictNode`, which announces the leave as the node itself would:
 * the others read the directory at once and carry its sessions on from Redis at the device's next record.
 */
import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import type { Logger } from '../app/logger.ts';
import { OutageLog } from '../app/outage-log.ts';
import type { Redis } from '../app/redis.ts';
import { MAX_NODES } from '../dtls/cluster/cid.ts';
import type { NodeAddress, NodeDirectory } from '../dtls/cluster/directory.ts';

export type { NodeAddress } from '../dtls/cluster/directory.ts';

/** PEXPIRE only while the key still holds our value; DEL likewise. */
const RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0";
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
/** A directory read because a CID named an unknown node waits at least this long after the previous read. */
const MIN_LOOKUP_INTERVAL_MS = 250;

/**
 * Gives back the node id of the dead node whose inter-node port was `node` (address and port as it registered them),
 * and announces its leave to the others, as it would have done itself. Only the entry read is deleted (a process that
 * registered the same address since keeps its id). Returns the ids given back.
 */
export async function evictNode(redis: Redis, deployment: string, node: NodeAddress): Promise<number[]> {
  const prefix = `{${deployment}:dtls-cluster}:node:`;
  const values = await redis.mget(Array.from({ length: MAX_NODES }, (_, id) => `${prefix}${id}`));
  const evicted: number[] = [];
  for (const [id, value] of values.entries()) {
    const [address, port] = value?.split(' ') ?? [];
    if (address !== node.address || Number(port) !== node.port) continue;
    if (Number(await redis.eval(RELEASE, 1, `${prefix}${id}`, value!)) === 1) evicted.push(id);
  }
  for (const id of evicted) await redis.publish(`{${deployment}:dtls-cluster}:changes`, `evicted leave ${id}`);
  return evicted;
}

export class NodeRegistry implements NodeDirectory {
  readonly #redis: Redis;
  readonly #log: Logger;
  readonly #prefix: string;
  readonly #value: string;
  readonly #leaseMs: number;
  readonly #outage: OutageLog;
  readonly #channel: string;
  readonly #instance: string;
  #subscriber: Redis | null = null;
  #nodeId = -1;
  #nodes = new Map<number, NodeAddress>();
  #heartbeat: NodeJS.Timeout | null = null;
  #refreshing: Promise<void> | null = null;
  /** an announcement came while a read was under way: that read may predate it, so read once more */
  #readAgain = false;
  #lastRead = 0;
  #stopped = false;

  constructor(redis: Redis, log: Logger, deployment: string, self: NodeAddress, leaseMs: number) {
    this.#redis = redis;
    this.#log = log;
    this.#prefix = `{${deployment}:dtls-cluster}:node:`;
    this.#channel = `{${deployment}:dtls-cluster}:changes`;
    this.#instance = randomBytes(8).toString('hex');
    this.#value = `${self.address} ${self.port} ${this.#instance} batches`;
    this.#leaseMs = leaseMs;
    this.#outage = new OutageLog(
      log,
      'dtls cluster: the node directory in Redis is unreachable; forwarding with the nodes known before',
      'dtls cluster: the node directory in Redis is reachable again',
    );
  }

  /** This node's id (valid after join). */
  get nodeId(): number {
    return this.#nodeId;
  }

  /** Live nodes as last read, this one included. */
  get nodes(): ReadonlyMap<number, NodeAddress> {
    return this.#nodes;
  }

  /** Listens for the others' joins and leaves, leases a free node id (trying them from a random one on), announces it and starts the heartbeat. */
  async join(): Promise<number> {
    await this.#listen();
    this.#nodeId = await this.#lease(Math.floor(Math.random() * MAX_NODES));
    await this.#read();
    this.#announce('join');
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

  /** Stops the heartbeat, gives the node id back and tells the others. */
  async leave(): Promise<void> {
    this.#stopped = true;
    if (this.#heartbeat) clearTimeout(this.#heartbeat);
    await this.#redis.eval(RELEASE, 1, this.#key(this.#nodeId), this.#value).catch(() => undefined);
    this.#announce('leave');
    const subscriber = this.#subscriber;
    this.#subscriber = null;
    await subscriber?.quit().catch(() => subscriber.disconnect());
  }

  /** A connection of its own for the announcements (a subscribed connection runs no other commands). */
  async #listen(): Promise<void> {
    const redis = this.#redis;
    const subscriber: Redis = redis instanceof Cluster ? redis.duplicate() : redis.duplicate();
    this.#subscriber = subscriber;
    subscriber.on('error', () => undefined); // the heartbeat logs the directory's outages
    subscriber.on('message', (_channel: string, message: string) => {
      // our own announcement changes nothing we do not know
      if (!message.startsWith(`${this.#instance} `)) void this.#refresh(true);
    });
    // announcements made while the connection was away are lost: read the directory when it is back
    subscriber.on('ready', () => void this.#refresh(true));
    await subscriber.subscribe(this.#channel);
  }

  /** Best effort: a node that misses it learns the same at its next heartbeat. */
  #announce(change: 'join' | 'leave'): void {
    this.#redis.publish(this.#channel, `${this.#instance} ${change} ${this.#nodeId}`).catch((err: Error) => this.#outage.down(err));
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
        if (this.#nodeId !== before)
          this.#log.error({ before, now: this.#nodeId }, 'dtls cluster: this node lost its node id; sessions under the old one are reached no more');
      }
      await this.#read();
      this.#outage.up();
    } catch (err) {
      this.#outage.down(err);
    }
  }

  /** Reads the directory; `announced`: a join or leave was heard, so a read already under way may be too early. */
  #refresh(announced = false): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (this.#refreshing) {
      if (announced) this.#readAgain = true;
      return this.#refreshing;
    }
    this.#refreshing = this.#read()
      .catch((err: Error) => this.#outage.down(err))
      .finally(() => {
        this.#refreshing = null;
        if (this.#readAgain) {
          this.#readAgain = false;
          void this.#refresh();
        }
      });
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
