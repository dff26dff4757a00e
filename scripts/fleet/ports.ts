// Ports for the processes the fleet, the tests and the bench start: below Linux's ephemeral range, so no outgoing
// socket takes one between the moment it is picked and the moment its process binds it.
import dgram from 'node:dgram';
import net from 'node:net';

/** Ports handed out by freePort in this process: two nodes never get the same one. */
const handedOut = new Set<number>();

/**
 * A port free for TCP and UDP on every address (as the nodes bind them) below Linux's ephemeral range (32768 on): a
 * node's ports must still be free when it restarts, and a port from that range may meanwhile be any outgoing
 * socket's (nginx's own, to the other nodes).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port)) continue;
    const tcp = net.createServer();
    const tcpFree = await new Promise<boolean>((r) => tcp.once('error', () => r(false)).listen(port, () => r(true)));
    if (!tcpFree) continue;
    const udp = dgram.createSocket('udp4');
    const udpFree = await new Promise<boolean>((r) => {
      udp.once('error', () => r(false));
      udp.bind(port, () => r(true));
    });
    await new Promise((r) => tcp.close(r));
    try {
      udp.close();
    } catch {
      /* a socket that failed to bind is closed already */
    }
    if (udpFree) {
      handedOut.add(port);
      return port;
    }
  }
}
