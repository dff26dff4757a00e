export { createPskTlsServer, PskTlsConnection } from './server.ts';
export type { PskTlsServerOptions, TlsClientErrorInfo } from './server.ts';
export { AlertDescription, AlertLevel, TlsAlert, TlsPeerAlert } from './alert.ts';
export { CIPHER_SUITES } from './suites/index.ts';
export type { CipherSuite, RecordProtection } from './suites/index.ts';
