/**
 * The server's connection table: which association a datagram is for. It counts and limits nothing (the server's
 * admission decides before an entry is made) and keeps three keys:
 *
 * - by address:port, every association; a session that moved by its Connection ID into an address:port another
 *   session holds is not there (its records find it by CID), and the other keeps its address:port;
 * - restarts by address:port: a handshake started by a ClientHello (cookie checked) to the address:port of an
 *   established session. The old session keeps the address:port until this handshake completes, then it is replaced
 *   (RFC 6347 §4.2.8): a replayed ClientHello proves nothing about the device;
 * - by the Connection ID we issued (hex): RFC 9146, a record with our CID finds its session from any address.
 */
import type { DtlsSession } from './session.ts';

const peerKey = (address: string, port: number) => `${address}:${port}`;

export class ConnectionTable {
  readonly #peers = new Map<string, DtlsSession>();
  readonly #restarts = new Map<string, { session: DtlsSession; replaces: DtlsSession }>();
  readonly #byCid = new Map<string, DtlsSession>();

  /** The session that negotiated this Connection ID (a Buffer, or its hex). */
  byCid(cid: Buffer | string): DtlsSession | undefined {
    return this.#byCid.get(typeof cid === 'string' ? cid : cid.toString('hex'));
  }

  /** The association of this address:port (not a handshake restarting it). */
  at(address: string, port: number): DtlsSession | undefined {
    return this.#peers.get(peerKey(address, port));
  }

  /** The handshake restarting the session of this address:port, while it runs. */
  restartAt(address: string, port: number): DtlsSession | undefined {
    return this.#restarts.get(peerKey(address, port))?.session;
  }

  /** A handshake admitted: at its address:port, or as the restart of `old`, the session there. */
  addHandshake(session: DtlsSession, old: DtlsSession | undefined): void {
    const key = peerKey(session.remoteAddress, session.remotePort);
    if (old) this.#restarts.set(key, { session, replaces: old });
    else this.#peers.set(key, session);
    if (session.connectionId) this.#byCid.set(session.connectionId.toString('hex'), session);
  }

  /** Whether a session kept by another process may be carried on here: none here holds its CID (or, without one, its address:port). */
  mayCarryOn(cid: string | undefined, address: string, port: number): boolean {
    return cid !== undefined ? !this.#byCid.has(cid) : !this.#peers.has(peerKey(address, port));
  }

  /** A kept session carried on here: at its address:port unless another holds it, and by its CID. */
  addCarriedOn(session: DtlsSession, cid: string | undefined): void {
    const key = peerKey(session.remoteAddress, session.remotePort);
    if (!this.#peers.has(key)) this.#peers.set(key, session);
    if (cid !== undefined) this.#byCid.set(cid, session);
  }

  /** A handshake completed; when it restarted a session, it takes that one's address:port and the old session is returned (to be ended). */
  established(session: DtlsSession): DtlsSession | undefined {
    const key = peerKey(session.remoteAddress, session.remotePort);
    const restart = this.#restarts.get(key);
    if (restart?.session !== session) return undefined;
    this.#restarts.delete(key);
    this.#peers.set(key, session);
    return restart.replaces;
  }

  /** A session moved by its CID (called before it takes the new address): it leaves its address:port and takes `to`'s unless another holds it. */
  moved(session: DtlsSession, to: { address: string; port: number }): void {
    const from = peerKey(session.remoteAddress, session.remotePort);
    if (this.#peers.get(from) === session) this.#peers.delete(from);
    const key = peerKey(to.address, to.port);
    if (!this.#peers.has(key)) this.#peers.set(key, session);
  }

  /** A session ended: every entry of it goes. */
  closed(session: DtlsSession): void {
    const key = peerKey(session.remoteAddress, session.remotePort);
    if (this.#peers.get(key) === session) this.#peers.delete(key);
    if (this.#restarts.get(key)?.session === session) this.#restarts.delete(key);
    if (session.connectionId) this.#byCid.delete(session.connectionId.toString('hex'));
  }
}
