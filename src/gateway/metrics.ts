import { Counter } from 'prom-client';

/** Device-edge counters exported on /metrics. */
export const deviceCounters = {
  requests: new Counter({ name: 'gateway_device_requests_total', help: 'Device requests received', labelNames: ['protocol'] }),
  handshakeFailures: new Counter({ name: 'gateway_handshake_failures_total', help: 'Failed device handshakes', labelNames: ['protocol'] }),
  refused: new Counter({ name: 'gateway_device_requests_refused_total', help: 'Requests of authenticated devices refused at the gateway', labelNames: ['protocol', 'reason'] }),
  coapMalformed: new Counter({ name: 'gateway_coap_malformed_total', help: 'CoAP datagrams dropped (or reset) as malformed', labelNames: ['protocol'] }),
};
