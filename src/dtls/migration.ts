/**
 * Connection ID migration (RFC 9146 §6): where an established session's answers go. An authentic tls12_cid record,
 * newer than any before it, from another address/port moves the session there, unless the server refuses the move;
 * and answers go back the way the newest authentic record came: straight from the server's socket, or through the
 * cluster node that relayed it (src/dtls/cluster/).
 */

/**
 * A way to the peer other than the server's own socket: the datagram goes back through the cluster node the peer's
 * records arrive at (src/dtls/cluster/), which sends it to `address`:`port` from the socket they came in on.
 */
export type Relay = (datagram: Buffer, address: string, port: number) => void;

/** Where a datagram came from, and the relay it came through when another cluster node received it. */
export interface PeerRoute {
  address: string;
  port: number;
  relay?: Relay;
}

/** What moves: the session's route to its peer, and its 'migrate' event. */
export interface Movable {
  remoteAddress: string;
  remotePort: number;
  relay: Relay | undefined;
  relayStreak: number;
  emit(event: 'migrate', from: { address: string; port: number }): boolean;
}

/**
 * Follows the newest authentic record of an established session to `from` (the caller checked it is authentic and
 * newest). A move asks `host.migrate` first: refused, the session stays where it is.
 */
export function followPeer<S extends Movable>(s: S, from: PeerRoute, host: { migrate(session: S, to: { address: string; port: number }): boolean }): void {
  const moved = from.address !== s.remoteAddress || from.port !== s.remotePort;
  if (moved && !host.migrate(s, from)) return;
  // answers go back the way the newest authentic record came: directly, or through the cluster node that relayed it
  s.relayStreak = from.relay === undefined ? 0 : from.relay === s.relay ? s.relayStreak + 1 : 1;
  s.relay = from.relay;
  if (!moved) return;
  const old = { address: s.remoteAddress, port: s.remotePort };
  s.remoteAddress = from.address;
  s.remotePort = from.port;
  s.emit('migrate', old);
}
