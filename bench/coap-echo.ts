// What this runtime spends on the part of a report libcoap's example server does, for the floor rows (bench/coap.ts):
// the gateway's own DTLS server and CoAP exchange layer (src/dtls, src/coap/endpoint.ts), each request answered 2.04 at
// once: no device lookup, no queue, no sandbox, no store. A child process of bench/coap.ts, driven by the same load as
// libcoap's coap-server-openssl; every PSK identity maps to BENCH_PSK. Sends { ready: port } once it listens.
import { createDtlsServer } from '../src/dtls/server.ts';
import { CoapEndpoint } from '../src/coap/endpoint.ts';

const key = Buffer.from(process.env.BENCH_PSK ?? '', 'hex');
const server = createDtlsServer({
  socket: 0,
  host: '127.0.0.1',
  lookupPsk: async () => key,
  maxSessions: 100_000,
  maxHandshakes: 10_000,
  maxSessionsPerAddress: 100_000,
  handshakeRatePerAddress: 1_000_000,
  handshakeBurstPerAddress: 1_000_000,
});
server.on('session', (session) => {
  const endpoint = new CoapEndpoint({ send: (d) => session.send(d), handler: async () => ({ code: '2.04' }) });
  session.on('data', (d: Buffer) => endpoint.receive(d));
  session.on('close', () => endpoint.close());
});
server.on('handshakeError', () => undefined);
server.on('listening', () => process.send?.({ ready: server.address().port }));
process.on('SIGTERM', () => {
  void server.close().then(() => process.exit(0));
});
