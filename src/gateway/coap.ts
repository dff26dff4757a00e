/**
 * The device-facing CoAP listeners, as the service starts them: `coaps` (CoAP over our DTLS 1.2 server) and, only when
 * COAP_PORT is set, plain `coap`. One job per file in coap/:
 *
 *   listener.ts  the sockets: the DTLS server's wiring (certificates, kept sessions, cluster), plain coap, shutdown
 *   sessions.ts  who the device of each coaps session is, its CoAP endpoint, what a kept session carries on
 *   requests.ts  a CoAP request to a queued job and its answer (status → CoAP code, body → Content-Format)
 */
export { PLAIN_IDENTITY_QUERY, startCoapDeviceListener } from './coap/listener.ts';
export type { CoapDeviceListener } from './coap/listener.ts';
export { coapCode } from './coap/requests.ts';
