/** CoAP (RFC 7252, RFC 7959) server side, transport-agnostic: see endpoint.ts for the layers. */
export { CoapEndpoint } from './endpoint.ts';
export type { CoapEndpointOptions, CoapHandler, CoapRequest, CoapResponse, Exchange } from './endpoint.ts';
export { CoapUdpServer } from './udp.ts';
export { UploadBudget } from './block.ts';
export { DedupLimit } from './dedup.ts';
export type { UdpPeer } from './udp.ts';
export { COAP_DEFAULTS } from './config.ts';
export type { CoapConfig } from './config.ts';
export { ContentFormat, optionText, stringOptions, uintOption, encodeUint } from './message.ts';
export type { CoapOption } from './message.ts';
