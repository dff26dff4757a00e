// A bare UDP relay for bench/cid-routing.ts, the floor of a forwarded record: what a process on this runtime spends
// to pass a device's datagram on to the node holding its session and the answer back, doing nothing else (no DTLS
// header read, no owner lookup, no batch, no tag). Like nginx's UDP proxy it keeps one upstream socket per device
// address, connected to BENCH_RELAY_TARGET (a port on 127.0.0.1), so the owner sees one stable address per device.
// Tells its parent { ready: { port } } once it listens; { stop } closes it.
import dgram from 'node:dgram';

const target = Number(process.env.BENCH_RELAY_TARGET);
const front = dgram.createSocket('udp4');
/** Per device address: its upstream socket, and what came before that socket was connected. */
const upstreams = new Map<string, { socket: dgram.Socket; waiting: Buffer[] | null }>();

front.on('message', (msg, from) => {
  const key = `${from.address}:${from.port}`;
  const up = upstreams.get(key);
  if (up && !up.waiting) {
    up.socket.send(msg);
    return;
  }
  if (up) {
    up.waiting!.push(msg);
    return;
  }
  const socket = dgram.createSocket('udp4');
  const entry = { socket, waiting: [msg] as Buffer[] | null };
  upstreams.set(key, entry);
  socket.on('message', (answer) => front.send(answer, from.port, from.address));
  socket.connect(target, '127.0.0.1', () => {
    for (const m of entry.waiting!) socket.send(m);
    entry.waiting = null;
  });
});
front.bind(0, '127.0.0.1', () => process.send!({ ready: { port: front.address().port } }));
process.on('message', (m: { stop?: true }) => {
  if (!m.stop) return;
  for (const { socket } of upstreams.values()) socket.close();
  front.close();
  process.exit(0);
});
