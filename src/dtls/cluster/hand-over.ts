/**
 * The server's side of a CID-routed cluster: the CidRouter it was given (routeCids), and the hand-over of an
 * established Connection ID session to another node (DtlsServer.handOver), with the records that arrive for the
 * session while it is being handed over held and then sent after it.
 */
import type { KeptSessions } from '../kept-sessions.ts';
import { HELD_PER_LOOKUP, sessionRef } from '../kept-sessions.ts';
import type { DtlsSession, PeerRoute } from '../session.ts';

/**
 * Routing of tls12_cid records among the nodes of a cluster (src/dtls/cluster/). Without one, CIDs are random and a
 * record whose CID no session here holds is dropped.
 */
export interface CidRouter {
  /** A new CID of SERVER_CID_LENGTH bytes that names this node. */
  newCid(): Buffer;
  /** A tls12_cid record (whole datagram) arrived from `from` whose CID no session of this server holds. */
  unclaimed(cid: Buffer, datagram: Buffer, from: { address: string; port: number }): void;
}

/** What a hand-over needs of its server. */
export interface HandOverHost {
  /** Whether the server was closed. */
  closed(): boolean;
  readonly kept: KeptSessions;
  /** The application's bytes kept with a session. */
  attachment(s: DtlsSession): Buffer | undefined;
  /** A held datagram, handled by the session after all (the hand-over failed). */
  handle(s: DtlsSession, datagram: Buffer, from: PeerRoute): void;
  emit(event: 'keeperError', err: unknown): void;
}

export class ClusterHandOver {
  /** Set by routeCids(): CIDs name this node, and records of CIDs held elsewhere go there. */
  router: CidRouter | null = null;
  readonly #host: HandOverHost;
  /** Sessions being handed over to another node, with the datagrams that arrived for them meanwhile. */
  readonly #handingOver = new Map<DtlsSession, Array<[Buffer, PeerRoute]>>();

  constructor(host: HandOverHost) {
    this.#host = host;
  }

  /** True when `session` is being handed over: the datagram waits for the outcome (a bounded number; more are dropped). */
  held(session: DtlsSession, datagram: Buffer, from: PeerRoute): boolean {
    if (this.#handingOver.size === 0) return false;
    const held = this.#handingOver.get(session);
    if (!held) return false;
    if (held.length < HELD_PER_LOOKUP) held.push([datagram, from]);
    return true;
  }

  /** See DtlsServer.handOver. */
  async handOver(s: DtlsSession, announce: () => Promise<unknown>): Promise<boolean> {
    const { kept } = this.#host;
    const keeper = kept.keeper;
    const cid = s.connectionId;
    const router = this.router;
    if (!keeper || !cid || !router || this.#host.closed() || kept.suspending || !s.established || kept.isRenewing(s) || this.#handingOver.has(s)) return false;
    const held: Array<[Buffer, PeerRoute]> = [];
    this.#handingOver.set(s, held);
    let gone = false;
    try {
      await keeper.saveAll([{ ref: sessionRef(s), motion: s.motion(this.#host.attachment(s)) }]);
      await announce();
      gone = s.established && !this.#host.closed() && !kept.suspending;
    } catch (err) {
      this.#host.emit('keeperError', err);
    }
    this.#handingOver.delete(s);
    if (gone) kept.giveUp(s);
    for (const [datagram, from] of held) {
      if (gone) router.unclaimed(cid, datagram, { address: from.address, port: from.port });
      else this.#host.handle(s, datagram, from);
    }
    return gone;
  }
}
