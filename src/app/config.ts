import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { DEFAULT_BATCH_BYTES, DEFAULT_BATCH_WINDOW_MS } from '../dtls/cluster/messages.ts';
import { DTLS_DEFAULTS } from '../dtls/limits.ts';
import type { DtlsLimits } from '../dtls/limits.ts';

/** Records in a row through one other gateway node after which a session moves there (DTLS_CLUSTER_HANDOVER_AFTER). */
export const DEFAULT_HANDOVER_AFTER = 4;

export type Role = 'all' | 'api' | 'gateway' | 'worker';
const ROLES: Role[] = ['all', 'api', 'gateway', 'worker'];

/** The one validated configuration object. Nothing else reads process.env. */
export interface Config {
  /** the roles this process runs; `all` stands for api, gateway and worker */
  roles: Role[];
  databaseUrl: string | null;
  /** a pooled database connection idle this long is closed (and opened again when needed) */
  databaseIdleTimeoutMs: number;
  /** DATABASE_READ_URL: a streaming replica for the read-heavy operations; null = the primary */
  databaseReadUrl: string | null;
  redisUrl: string;
  /** REDIS_CLUSTER_NODES: some nodes of a Redis Cluster (it finds the rest); empty: the single Redis at redisUrl */
  redisClusterNodes: { host: string; port: number }[];
  dataDir: string;
  certsDir: string;
  apiHost: string;
  apiPort: number;
  httpsDevicePort: number;
  /** per-source-address admission on HTTPS_DEVICE_PORT (src/gateway/https.ts), with src/dtls/limits.ts's primitives */
  httpsLimits: { maxConnectionsPerAddress: number; handshakeRatePerAddress: number; handshakeBurstPerAddress: number };
  /** host name devices and third parties reach the device ports at: webhook URLs carry it */
  publicHost: string;
  coapsPort: number;
  coapPort: number | null;
  /** PSK identities allowed on plain CoAP; a device names its own with the Uri-Query `psk-identity=` */
  coapPlainIdentities: string[];
  /** a CoAP answer ready within this window rides on the ACK; later ones come as a separate response */
  coapPiggybackMs: number;
  /** limits of the DTLS server behind COAPS_PORT (defaults: DTLS_DEFAULTS in src/dtls/limits.ts) */
  dtls: DtlsLimits;
  /** the inter-node port of a CID-routed cluster of gateway nodes (src/dtls/cluster/); null: one node, as before */
  dtlsCluster: { port: number; address: string; leaseMs: number; batchBytes: number; batchWindowMs: number; handoverAfter: number } | null;
  /** DTLS sessions and the resumption cache kept in Redis (src/gateway/dtls-session-store.ts) */
  dtlsKeepSessions: boolean;
  logLevel: string;
  /** 32-byte server key; JWT signing key and PSK encryption key are derived from it. */
  secretKey: Buffer;
  tokenLifetimeSeconds: number;
  /** PUBLIC_URL: the console's origin as people reach it; the links of invitation and password reset mails start with it */
  publicUrl: string;
  /** a person's console session ends this long after its last request, and this long after it began at the latest */
  sessionIdleMinutes: number;
  sessionAbsoluteHours: number;
  /** MAP_STYLE_URL: a MapLibre style the console's map draws under the environment's own tiles; null: no base map */
  mapStyleUrl: string | null;
  /** null: this process's own API (role all), or http://127.0.0.1:API_PORT */
  monitoringCoreUrl: string | null;
  internalToken: string;
  sandboxMemoryMb: number;
  sandboxTimeoutMs: number;
  sandboxBatchRuns: number;
  /** bounds on supplier code and what it produces (src/sandbox/limits.ts) */
  supplierCode: SupplierCodeLimits;
  workerConcurrency: number;
  gatewayWaitMs: number;
  deviceBodyLimitBytes: number;
  /** deepest nesting of arrays and objects in a REST request body or query */
  jsonMaxDepth: number;
  /** statement_timeout of an analytics query (GET /analytics/); beyond it: 400 analytics_query_too_broad */
  analyticsStatementTimeoutMs: number;
  /** analytics statements one process runs at once; more wait, holding no database connection */
  analyticsConcurrency: number;
  /** dry runs of supplier code (src/connectivity/dry-run/): one environment's token bucket, refilled per minute, and its size */
  dryRunsPerMinute: number;
  dryRunBurst: number;
  /** live log streams (GET /supplier-activity/stream) one environment may hold open at once, over every API process */
  liveLogStreamsPerEnvironment: number;
  /** failed machine logins per source address, and per account, within loginFailureWindowSeconds before 429 */
  loginFailuresPerAddress: number;
  loginFailuresPerAccount: number;
  loginFailureWindowSeconds: number;
  shutdownGraceMs: number;
  queueName: string;
  /** changes made through the API are logged (src/app/author.ts) */
  auditLog: boolean;
  /** how long an export's file and link last (src/monitoring/exports/) */
  exportRetentionHours: number;
  exportConcurrency: number;
  /** QUEUE_SHARDS: device queues; a device's jobs all go to one of them (src/app/redis-keys.ts) */
  queueShards: number;
  /** SMTP server for command mail (`smtp://user:pass@host:587`), or null: mail is logged instead */
  smtpUrl: string | null;
  mailFrom: string;
  /** first retry of a mail SMTP did not take (server away, 4xx), doubling up to mailRetryMaxMs; a 5xx is not retried */
  mailRetryBaseMs: number;
  mailRetryMaxMs: number;
  /** the operator's addresses settings feedback is mailed to; empty: feedback is only stored */
  feedbackMailTo: string[];
  /** environments the accounts of one operator-made environment (and of those it added) may add through the API */
  environmentAddLimit: number;
  /** a recipient gets at most one issue mail per this window; what happens meanwhile comes as one digest at its end */
  notificationDigestSeconds: number;
  /** a supplier object's subscriber gets at most one failure alert per this window; the next one sums up the failures since */
  notificationAlertQuietSeconds: number;
  /** largest firmware image (decoded bytes) */
  firmwareMaxBytes: number;
  /** memory the gateway spends on hot firmware images, by sha256 */
  firmwareCacheBytes: number;
  /** hosts exec.sendRequest may reach (lower case; `*.example.com` matches subdomains); empty: none */
  outboundAllowedHosts: string[];
  outboundTimeoutMs: number;
  outboundMaxResponseBytes: number;
  /** PEM file of extra CA certificates outbound requests trust (besides the system's), or null */
  outboundCaFile: string | null;
  /** whether the report path checks measurements against pin thresholds (opens threshold issues) */
  thresholdEvaluation: boolean;
  localHandoff: boolean;
  localHandoffClaimMs: number;
  /** how long the gateway gathers device requests into one queued batch (while no batch of it is being queued) */
  queueBatchDelayMs: number;
  /** how often a worker looks for linked devices silent past their connectivity threshold */
  connectivityCheckMs: number;
}

/** Bounds on supplier code and on what it produces (applied by src/sandbox/). */
export interface SupplierCodeLimits {
  /** SANDBOX_MAX_SOURCE_CHARS: longest source a save compiles */
  maxSourceChars: number;
  /** SANDBOX_COMPILES_PER_MINUTE: new (uncached) sources one environment may compile on save per minute */
  compilesPerMinute: number;
  /** SANDBOX_COMPILE_TIMEOUT_MS: a compile running longer is a fault; its thread is replaced */
  compileTimeoutMs: number;
  /** SANDBOX_MAX_ANSWER_BYTES: body of a handler's answer to a device (bytes as sent) */
  maxAnswerBytes: number;
  /** SANDBOX_MAX_RESULT_BYTES: JSON of what one run returns (answer, parsed report, identifier) */
  maxResultBytes: number;
  /** SANDBOX_MAX_LOG_LINES: exec.addLog lines kept per run */
  maxLogLines: number;
  /** SANDBOX_MAX_LOG_LINE_CHARS: characters kept of one log line */
  maxLogLineChars: number;
  /** SANDBOX_MAX_CALLS: exec calls per run */
  maxCalls: number;
  /** SANDBOX_MAX_CALL_BYTES: JSON of one exec call's arguments (a parseReport payload, setDeviceFields fields ...) */
  maxCallBytes: number;
  /** ACTIVITY_MAX_BYTES: JSON of one activity as stored: triggerData and log lines, its sub-activities' included */
  maxActivityBytes: number;
}

/** Configuration variables: name → [default shown in docs/configuration.md, meaning]. */
export const CONFIG_VARIABLES: Record<string, [string, string]> = {
  ROLE: ['all', 'all, or a comma-separated list of api, gateway, worker (also the first CLI argument)'],
  DATABASE_URL: ['unset → embedded PostgreSQL in DATA_DIR', 'PostgreSQL connection string'],
  DATABASE_IDLE_TIMEOUT_MS: ['10000', 'a pooled database connection idle this long is closed'],
  DATABASE_READ_URL: ['unset → the primary (DATABASE_URL)', 'PostgreSQL connection string of a streaming replica of DATABASE_URL: measurement find, chart series and analytics read there'],
  REDIS_URL: ['redis://127.0.0.1:6379', 'Redis for queues, caches, counters'],
  REDIS_CLUSTER_NODES: ['unset → the single Redis at REDIS_URL', 'host:port,host:port,... of a Redis Cluster (some of its masters or replicas; the rest are found): queues, caches, counters, locks and pub/sub all run on it and REDIS_URL is not used (docs/fleet.md)'],
  DATA_DIR: ['./data', 'embedded database and other local state (the generated secret key)'],
  CERTS_DIR: ['./certs', 'device CA, server certificate for the TLS and DTLS device ports, example device certificate (created by npm run certs, and at start when missing)'],
  API_HOST: ['0.0.0.0', 'address the REST API binds to'],
  API_PORT: ['8080', 'REST API (HTTP)'],
  HTTPS_DEVICE_PORT: ['8443', 'device HTTPS (TLS 1.2 PSK)'],
  HTTPS_MAX_CONNECTIONS_PER_ADDRESS: ['1000', 'open connections per source IP address on the device HTTPS port (handshaking or established; cellular devices often share a carrier NAT address); beyond it a new connection is closed at once'],
  HTTPS_HANDSHAKE_RATE_PER_ADDRESS: ['100', 'new connections (each a TLS handshake) per second per source IP address on the device HTTPS port (token bucket refill)'],
  HTTPS_HANDSHAKE_BURST_PER_ADDRESS: ['200', 'new connections a source IP address may open at once on the device HTTPS port (token bucket size)'],
  PUBLIC_HOST: ['localhost', 'host name in the webhook URLs the API hands out (https://PUBLIC_HOST:HTTPS_DEVICE_PORT/webhook/...), also named by the server certificate'],
  COAPS_PORT: ['5684', 'CoAP over DTLS'],
  COAP_PORT: ['unset → off', 'plain CoAP, opt-in'],
  COAP_PLAIN_IDENTITIES: ['unset → none', 'comma-separated PSK identities that may use plain CoAP (Uri-Query psk-identity=...); every other plain request gets 4.01'],
  DTLS_MAX_SESSIONS: [String(DTLS_DEFAULTS.maxSessions), 'established DTLS sessions at most; handshakes beyond it are dropped'],
  DTLS_MAX_HANDSHAKES: [String(DTLS_DEFAULTS.maxHandshakes), 'DTLS handshakes in progress at most (after the stateless cookie check); when all are taken, a handshake from an address holding fewer takes the oldest slot of the address holding the most'],
  DTLS_MAX_SESSIONS_PER_ADDRESS: [String(DTLS_DEFAULTS.maxSessionsPerAddress), 'DTLS sessions per source IP address (cellular devices often share a carrier NAT address)'],
  DTLS_HANDSHAKE_RATE_PER_ADDRESS: [String(DTLS_DEFAULTS.handshakeRatePerAddress), 'DTLS handshakes per second per source IP address (token bucket refill)'],
  DTLS_HANDSHAKE_BURST_PER_ADDRESS: [String(DTLS_DEFAULTS.handshakeBurstPerAddress), 'DTLS handshakes a source IP address may start at once (token bucket size)'],
  DTLS_HANDSHAKE_TIMEOUT_MS: [String(DTLS_DEFAULTS.handshakeTimeoutMs), 'a DTLS handshake not complete after this long is abandoned'],
  DTLS_IDLE_TIMEOUT_MS: [String(DTLS_DEFAULTS.idleTimeoutMs), 'a DTLS session without an authentic record for this long is closed (devices resume or handshake again)'],
  DTLS_KEEP_SESSIONS: ['on', 'on or off: established DTLS sessions (sealed with SECRET_KEY) and the resumption cache live in Redis, so a restarted gateway or another node carries them on without a handshake (docs/decisions.md)'],
  DTLS_MTU: [String(DTLS_DEFAULTS.mtu), 'largest datagram the DTLS server sends (its flights are fragmented to fit)'],
  DTLS_RECEIVE_BUFFER_BYTES: [String(DTLS_DEFAULTS.receiveBufferBytes), 'receive buffer of the DTLS socket (capped by the kernel\'s net.core.rmem_max: raise that too); the kernel\'s default overflows under a ClientHello flood whenever the event loop pauses, and drops devices\' datagrams with the flood\'s'],
  DTLS_CLUSTER_PORT: ['unset → off (one gateway node)', 'UDP port for the other gateway nodes of a CID-routed cluster (docs/fleet.md): a node forwards a DTLS record whose Connection ID names another node there, and relays that node\'s answer to the device (0: any free port)'],
  DTLS_CLUSTER_ADDRESS: ['this host\'s first non-loopback IPv4 address, else 127.0.0.1', 'address the cluster port is bound on and the other nodes reach it at (registered in Redis)'],
  DTLS_CLUSTER_LEASE_MS: ['10000', 'a node holds its node id in Redis for this long, renewed every third of it; a node that stops is forgotten this much later (one that shuts down cleanly, at once)'],
  DTLS_CLUSTER_BATCH_BYTES: [String(DEFAULT_BATCH_BYTES), 'largest datagram between two gateway nodes: the forwarded records and relayed answers bound for one node within one event-loop turn travel together in one datagram with one MAC (0: each alone, at once)'],
  DTLS_CLUSTER_BATCH_WINDOW_MS: [String(DEFAULT_BATCH_WINDOW_MS), 'under load, a datagram between gateway nodes waits this long for more records before it leaves (0: only the records of one event-loop turn travel together)'],
  DTLS_CLUSTER_HANDOVER_AFTER: [String(DEFAULT_HANDOVER_AFTER), 'a session whose device\'s records reached this node through one other gateway node this many times in a row moves to that node between two exchanges, so its records stop being forwarded (0: never; sessions stay where their handshake was)'],
  COAP_PIGGYBACK_MS: ['1000', 'a CoAP answer ready within this window is piggybacked on the ACK, later ones follow as a separate response'],
  LOG_LEVEL: ['info', 'pino level'],
  SECRET_KEY: ['unset → generated once into DATA_DIR/secret.key', '64 hex digits; signs tokens and encrypts device keys at rest. Every process of a deployment needs the same one'],
  TOKEN_LIFETIME_SECONDS: ['2592000 (30 days)', 'lifetime of a machine login token'],
  PUBLIC_URL: ['unset → http://localhost:API_PORT', 'the origin (scheme://host[:port], optionally a path) people reach the console at: invitation and password reset mails link to PUBLIC_URL/#/set-password?token=...; its origin is accepted as a console request\'s Origin, and https makes the session cookie Secure (TLS ended in front of the API)'],
  SESSION_IDLE_MINUTES: ['30', 'a person\'s console session (cookie gridgate_session) ends after this long without a request'],
  SESSION_ABSOLUTE_HOURS: ['12', 'a person\'s console session ends this long after the login at the latest, however active'],
  MAP_STYLE_URL: ['unset → no base map', 'an https URL of a MapLibre style JSON the console\'s map draws under the environment\'s pin groups and edges; its origin is added to the console\'s Content-Security-Policy'],
  MONITORING_CORE_URL: ['this process\'s API (roles all, or api with worker); required for a worker without api', 'where workers push condition reports'],
  INTERNAL_TOKEN: ['derived from SECRET_KEY', 'bearer token workers present to the monitoring core'],
  SANDBOX_MEMORY_MB: ['64', 'memory limit of one supplier isolate'],
  SANDBOX_TIMEOUT_MS: ['1000', 'wall-clock limit of one run of supplier code'],
  SANDBOX_BATCH_RUNS: ['64', 'runs of one supplier code that arrive together go into its isolate in one call, at most this many (1: each alone); each keeps its own outcome and limits'],
  SANDBOX_MAX_SOURCE_CHARS: ['1000000', 'longest event handler, parser or identifier a save compiles (400 naming the field)'],
  SANDBOX_COMPILES_PER_MINUTE: ['60', 'new (not yet compiled) sources one environment may save per minute (429 beyond)'],
  SANDBOX_COMPILE_TIMEOUT_MS: ['10000', 'a compile taking longer fails (its compiler thread is replaced)'],
  SANDBOX_MAX_ANSWER_BYTES: ['65536', 'body of a handler\'s answer to a device; a larger one fails the run (500 handler_error, invalid-result)'],
  SANDBOX_MAX_RESULT_BYTES: ['1048576', 'JSON of what one run of supplier code returns (answer, parsed report, identifier); a larger one fails the run'],
  SANDBOX_MAX_LOG_LINES: ['200', 'exec.addLog lines kept per run; the activity says how many were dropped'],
  SANDBOX_MAX_LOG_LINE_CHARS: ['2000', 'characters kept of one log line (marked `… [truncated]`)'],
  SANDBOX_MAX_CALLS: ['1000', 'exec calls per run; the next one throws in the supplier\'s code'],
  SANDBOX_MAX_CALL_BYTES: ['65536', 'JSON of one exec call\'s arguments (parseReport payload, setDeviceFields fields, ...); a larger call throws in the supplier\'s code'],
  DRY_RUNS_PER_MINUTE: ['60', 'dry runs of supplier code (POST .../dry-run) one environment may start per minute, sustained (token bucket refill; 429 rate_limit_error beyond)'],
  DRY_RUN_BURST: ['10', 'dry runs one environment may start at once (the token bucket\'s size)'],
  LIVE_LOG_STREAMS_PER_ENVIRONMENT: ['20', 'live log streams (GET /supplier-activity/stream) one environment may hold open at once, over every API process (429 rate_limit_error beyond)'],
  ACTIVITY_MAX_BYTES: ['1048576', 'JSON of one activity as stored (its triggerData and log lines, its sub-activities\' too); parts beyond it are stored as previews marked `"truncated": true`, with an error line saying so'],
  WORKER_CONCURRENCY: ['128', 'device requests of one supplier (environment) a worker process runs at once; a supplier with more waits for its own, never another\'s'],
  GATEWAY_WAIT_MS: ['5000', 'how long a device request waits for its handler before it gets 202 (the job stays queued)'],
  DEVICE_BODY_LIMIT_BYTES: ['65536', 'largest device request body'],
  JSON_MAX_DEPTH: ['32', 'deepest nesting of arrays and objects in a REST request body or query (device fields, a field configuration\'s defaultValue, ...); deeper is a 400 parameter_error'],
  ANALYTICS_STATEMENT_TIMEOUT_MS: ['10000', 'how long the database may compute one analytics query (GET /analytics/) before it cancels it; the answer is then 400 analytics_query_too_broad'],
  ANALYTICS_CONCURRENCY: ['2', 'analytics queries one process computes at once; more wait their turn without holding a database connection, so other operations keep theirs'],
  LOGIN_FAILURES_PER_ADDRESS: ['30', 'failed machine logins and two-factor checks (get-keyuri, enable, disable) from one source address within LOGIN_FAILURE_WINDOW_SECONDS; more are answered 429 rate_limit_error'],
  LOGIN_FAILURES_PER_ACCOUNT: ['10', 'failed machine logins and two-factor checks for one account (from any address) within LOGIN_FAILURE_WINDOW_SECONDS; more are answered 429 rate_limit_error'],
  LOGIN_FAILURE_WINDOW_SECONDS: ['300', 'the window the login failure limits count in (from the first failure)'],
  SHUTDOWN_GRACE_MS: ['10000', 'how long SIGTERM waits for in-flight jobs'],
  QUEUE_NAME: ['device-events', 'BullMQ queue name'],
  QUEUE_SHARDS: ['1', 'device queues the device jobs are spread over, by device (one device\'s jobs stay on one, in order); every worker takes from all of them. On a Redis Cluster each is a hash slot of its own, so more shards spread the queue over more masters. Lowering it strands the jobs in the dropped shards: drain them first'],
  QUEUE_BATCH_DELAY_MS: ['12', 'how long a gateway gathers device requests into one queued job before it queues them (at most 64; while one job is being queued the next gathers until it is): longer makes fewer, larger jobs, so less CPU per report, for that much more latency'],
  SMTP_URL: ['unset → mail is logged (info) and stored as failed, not sent', 'SMTP server for every mail (issue notifications, supplier alerts, command mails), e.g. smtp://user:pass@mail.example.com:587'],
  MAIL_FROM: ['gridgate <noreply@localhost>', 'sender of that mail'],
  MAIL_RETRY_BASE_MS: ['1000', 'first retry of a mail the SMTP server did not take (unreachable, 4xx), doubling per attempt up to MAIL_RETRY_MAX_MS, without end: an outage delays mail, never drops it; a 5xx refusal fails the mail with the server\'s reply'],
  MAIL_RETRY_MAX_MS: ['300000', 'longest wait between two tries of one mail'],
  FEEDBACK_MAIL_TO: ['empty → feedback is stored only', 'comma-separated addresses of the operator that settings feedback (POST /settings/feedback) is mailed to, through the mail queue; it is stored in the feedback table either way'],
  ENVIRONMENT_ADD_LIMIT: ['20', 'environments (monitoring and connectivity) the accounts of one environment the operator made, and of the environments they added, may add through environment add and supplier add; more are answered 400 parameter_error'],
  NOTIFICATION_DIGEST_SECONDS: ['300', 'a recipient gets at most one issue mail per this window: the first event is mailed at once, the later ones of the window come together in one digest mail at its end'],
  NOTIFICATION_ALERT_QUIET_SECONDS: ['3600', 'a subscriber of a supplier object gets its first failure alert at once, the next no sooner than this after the last, summing up the failures since'],
  FIRMWARE_MAX_BYTES: ['8388608 (8 MiB)', 'largest firmware image'],
  FIRMWARE_CACHE_BYTES: ['67108864 (64 MiB)', 'memory a gateway process keeps hot firmware images in (by sha256)'],
  OUTBOUND_ALLOWED_HOSTS: ['empty → none', 'comma-separated hosts exec.sendRequest may reach over HTTPS (`*.example.com` for subdomains)'],
  OUTBOUND_TIMEOUT_MS: ['3000', 'time limit of one outbound request (connect to last byte); the device\'s answer waits for it'],
  OUTBOUND_MAX_RESPONSE_BYTES: ['65536', 'response bytes read from an outbound request; the rest is cut off'],
  OUTBOUND_CA_FILE: ['unset', 'PEM file of extra CA certificates outbound requests trust'],
  LOCAL_HANDOFF: ['on', 'on or off: a worker in the same process as the gateway runs the batches that gateway queues without fetching them from Redis (each stays queued, out of other workers\' reach while it runs, until what it stored is on disk)'],
  LOCAL_HANDOFF_CLAIM_MS: ['30000', 'how long a batch taken by the worker beside its gateway stays out of other workers\' reach (renewed every third of it while it runs): after a crash of that process, its batches run elsewhere this much later'],
  THRESHOLD_EVALUATION: ['on', 'on or off: measurements of linked devices and of manual reports are checked against their pins\' thresholds and open or update threshold issues (off: no threshold issue opens; for measuring the report path without it)'],
  AUDIT_LOG: ['on', 'on or off: every change an account makes through the API is written to the audit log (settings find-log) in the change\'s own transaction (off: no log; for measuring its cost)'],
  EXPORT_RETENTION_HOURS: ['168', 'an export\'s CSV file (under DATA_DIR/exports) and its download link last this long after it is written; then the file is deleted and the export request shows status deleted'],
  EXPORT_CONCURRENCY: ['1', 'exports one worker process writes at once (each streams its rows from one PostgreSQL cursor), and exports of one environment queued or running at once (the rest wait their turn, so one environment\'s exports cannot hold back another\'s)'],
  CONNECTIVITY_CHECK_MS: ['30000', 'how often one worker (a Redis lock picks it) looks for linked devices silent past their connectivity threshold; an issue opens within the threshold plus this interval'],
};

/** The default CONFIG_VARIABLES documents for `name`: the one source of the configuration table and of the value used. */
function documentedDefault(name: string): string {
  const entry = CONFIG_VARIABLES[name];
  if (!entry) throw new Error(`config.ts reads ${name}, which CONFIG_VARIABLES does not document`);
  return entry[0];
}

/** The integer `name` gives, between `min` and `max`; unset, its documented default (the number it starts with). */
function int(env: NodeJS.ProcessEnv, name: string, min = 0, max = 2 ** 31): number {
  const raw = env[name];
  if (raw === undefined || raw === '') {
    const m = /^\d+/.exec(documentedDefault(name));
    if (!m) throw new Error(`config.ts: the documented default of ${name} is no integer`);
    return Number(m[0]);
  }
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name} must be an integer between ${min} and ${max}, got "${raw}"`);
  }
  return n;
}

/** The first non-loopback IPv4 address of this host (what the other nodes of a cluster most likely reach it at). */
function hostAddress(): string {
  const all = Object.values(networkInterfaces()).flat();
  return all.find((i) => i && i.family === 'IPv4' && !i.internal)?.address ?? '127.0.0.1';
}

/** REDIS_CLUSTER_NODES: host:port,host:port,... (an IPv6 host in brackets). */
function clusterNodes(raw: string): { host: string; port: number }[] {
  return raw.split(',').map((n) => n.trim()).filter((n) => n !== '').map((node) => {
    const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(node);
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new Error(`REDIS_CLUSTER_NODES must be host:port,host:port,..., got "${node}"`);
    return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
  });
}

/** PUBLIC_URL without its trailing slash; unset, this host's API port on localhost. */
function publicUrl(raw: string | undefined, apiPort: number): string {
  if (raw === undefined || raw === '') return `http://localhost:${apiPort}`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`PUBLIC_URL must be an http or https URL such as https://console.example.com, got "${raw}"`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '') {
    throw new Error(`PUBLIC_URL must be an http or https URL without query or fragment, got "${raw}"`);
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

/** MAP_STYLE_URL: an http(s) URL, or null when unset. */
function mapStyleUrl(raw: string | undefined): string | null {
  if (raw === undefined || raw === '') return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`MAP_STYLE_URL must be an http or https URL of a MapLibre style, got "${raw}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`MAP_STYLE_URL must be an http or https URL of a MapLibre style, got "${raw}"`);
  }
  return url.href;
}

/** `on` or `off`; unset, its documented default. */
function onOff(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') {
    const d = documentedDefault(name);
    if (d !== 'on' && d !== 'off') throw new Error(`config.ts: the documented default of ${name} is neither on nor off`);
    return d === 'on';
  }
  if (raw === 'on' || raw === 'off') return raw === 'on';
  throw new Error(`${name} must be on or off, got "${raw}"`);
}

function loadSecretKey(env: NodeJS.ProcessEnv, dataDir: string): Buffer {
  const raw = env.SECRET_KEY;
  if (raw) {
    if (!/^[0-9a-fA-F]{64}$/.test(raw)) throw new Error('SECRET_KEY must be 64 hex digits');
    return Buffer.from(raw, 'hex');
  }
  const file = path.join(dataDir, 'secret.key');
  if (existsSync(file)) return Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('hex'), { mode: 0o600 });
  return key;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, roleArg?: string): Config {
  const roles = (roleArg ?? env.ROLE ?? 'all').split(',').map((r) => r.trim()) as Role[];
  const unknown = roles.filter((r) => !ROLES.includes(r));
  if (unknown.length > 0 || roles.length === 0) throw new Error(`ROLE must be one or more of ${ROLES.join(', ')} (comma-separated), got "${unknown.join(',')}"`);
  const dataDir = path.resolve(env.DATA_DIR ?? './data');
  const apiPort = int(env, 'API_PORT', 0, 65535);
  const secretKey = loadSecretKey(env, dataDir);
  const alone = roles.includes('worker') && !roles.includes('api') && !roles.includes('all');
  // a worker's own port serves /health and /metrics only: it cannot be its monitoring core
  if (alone && !env.MONITORING_CORE_URL) throw new Error('MONITORING_CORE_URL must be set for a worker without the api role: the URL of this deployment\'s API (e.g. http://api-host:8080)');
  return {
    roles,
    databaseUrl: env.DATABASE_URL || null,
    databaseIdleTimeoutMs: int(env, 'DATABASE_IDLE_TIMEOUT_MS', 100),
    databaseReadUrl: env.DATABASE_READ_URL || null,
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    redisClusterNodes: clusterNodes(env.REDIS_CLUSTER_NODES ?? ''),
    dataDir,
    certsDir: path.resolve(env.CERTS_DIR ?? './certs'),
    apiHost: env.API_HOST || '0.0.0.0',
    apiPort,
    httpsDevicePort: int(env, 'HTTPS_DEVICE_PORT', 0, 65535),
    httpsLimits: {
      maxConnectionsPerAddress: int(env, 'HTTPS_MAX_CONNECTIONS_PER_ADDRESS', 1),
      handshakeRatePerAddress: int(env, 'HTTPS_HANDSHAKE_RATE_PER_ADDRESS', 1),
      handshakeBurstPerAddress: int(env, 'HTTPS_HANDSHAKE_BURST_PER_ADDRESS', 1),
    },
    publicHost: env.PUBLIC_HOST || 'localhost',
    coapsPort: int(env, 'COAPS_PORT', 0, 65535),
    coapPort: env.COAP_PORT ? int(env, 'COAP_PORT', 0, 65535) : null,
    coapPlainIdentities: (env.COAP_PLAIN_IDENTITIES ?? '').split(',').map((i) => i.trim()).filter((i) => i !== ''),
    coapPiggybackMs: int(env, 'COAP_PIGGYBACK_MS', 0, 60_000),
    dtlsKeepSessions: onOff(env, 'DTLS_KEEP_SESSIONS'),
    dtls: {
      maxSessions: int(env, 'DTLS_MAX_SESSIONS', 1),
      maxHandshakes: int(env, 'DTLS_MAX_HANDSHAKES', 1),
      maxSessionsPerAddress: int(env, 'DTLS_MAX_SESSIONS_PER_ADDRESS', 1),
      handshakeRatePerAddress: int(env, 'DTLS_HANDSHAKE_RATE_PER_ADDRESS', 1),
      handshakeBurstPerAddress: int(env, 'DTLS_HANDSHAKE_BURST_PER_ADDRESS', 1),
      handshakeTimeoutMs: int(env, 'DTLS_HANDSHAKE_TIMEOUT_MS', 1_000),
      idleTimeoutMs: int(env, 'DTLS_IDLE_TIMEOUT_MS', 1_000),
      mtu: int(env, 'DTLS_MTU', 256, 65_000),
      receiveBufferBytes: int(env, 'DTLS_RECEIVE_BUFFER_BYTES', 65_536, 2 ** 30),
    },
    dtlsCluster: env.DTLS_CLUSTER_PORT
      ? {
          port: int(env, 'DTLS_CLUSTER_PORT', 0, 65535),
          address: env.DTLS_CLUSTER_ADDRESS || hostAddress(),
          leaseMs: int(env, 'DTLS_CLUSTER_LEASE_MS', 300, 3_600_000),
          batchBytes: int(env, 'DTLS_CLUSTER_BATCH_BYTES', 0, 65_507),
          batchWindowMs: int(env, 'DTLS_CLUSTER_BATCH_WINDOW_MS', 0, 100),
          handoverAfter: int(env, 'DTLS_CLUSTER_HANDOVER_AFTER', 0, 1000),
        }
      : null,
    logLevel: env.LOG_LEVEL || 'info',
    secretKey,
    tokenLifetimeSeconds: int(env, 'TOKEN_LIFETIME_SECONDS', 60),
    publicUrl: publicUrl(env.PUBLIC_URL, apiPort),
    sessionIdleMinutes: int(env, 'SESSION_IDLE_MINUTES', 1, 7 * 24 * 60),
    sessionAbsoluteHours: int(env, 'SESSION_ABSOLUTE_HOURS', 1, 24 * 366),
    mapStyleUrl: mapStyleUrl(env.MAP_STYLE_URL),
    monitoringCoreUrl: env.MONITORING_CORE_URL || null,
    internalToken: env.INTERNAL_TOKEN || '',
    sandboxMemoryMb: int(env, 'SANDBOX_MEMORY_MB', 8, 4096),
    sandboxTimeoutMs: int(env, 'SANDBOX_TIMEOUT_MS', 10, 60_000),
    sandboxBatchRuns: int(env, 'SANDBOX_BATCH_RUNS', 1, 1000),
    supplierCode: {
      maxSourceChars: int(env, 'SANDBOX_MAX_SOURCE_CHARS', 1, 1_000_000),
      compilesPerMinute: int(env, 'SANDBOX_COMPILES_PER_MINUTE', 1, 1_000_000),
      compileTimeoutMs: int(env, 'SANDBOX_COMPILE_TIMEOUT_MS', 100, 600_000),
      maxAnswerBytes: int(env, 'SANDBOX_MAX_ANSWER_BYTES', 0, 64 * 1024 * 1024),
      maxResultBytes: int(env, 'SANDBOX_MAX_RESULT_BYTES', 1024, 256 * 1024 * 1024),
      maxLogLines: int(env, 'SANDBOX_MAX_LOG_LINES', 0, 100_000),
      maxLogLineChars: int(env, 'SANDBOX_MAX_LOG_LINE_CHARS', 1, 1_000_000),
      maxCalls: int(env, 'SANDBOX_MAX_CALLS', 0, 100_000),
      maxCallBytes: int(env, 'SANDBOX_MAX_CALL_BYTES', 64, 64 * 1024 * 1024),
      maxActivityBytes: int(env, 'ACTIVITY_MAX_BYTES', 4096, 256 * 1024 * 1024),
    },
    workerConcurrency: int(env, 'WORKER_CONCURRENCY', 1, 10_000),
    gatewayWaitMs: int(env, 'GATEWAY_WAIT_MS', 10, 120_000),
    deviceBodyLimitBytes: int(env, 'DEVICE_BODY_LIMIT_BYTES', 1, 64 * 1024 * 1024),
    jsonMaxDepth: int(env, 'JSON_MAX_DEPTH', 2, 1000),
    analyticsStatementTimeoutMs: int(env, 'ANALYTICS_STATEMENT_TIMEOUT_MS', 1, 600_000),
    analyticsConcurrency: int(env, 'ANALYTICS_CONCURRENCY', 1, 100),
    dryRunsPerMinute: int(env, 'DRY_RUNS_PER_MINUTE', 1, 1_000_000),
    dryRunBurst: int(env, 'DRY_RUN_BURST', 1, 1_000_000),
    liveLogStreamsPerEnvironment: int(env, 'LIVE_LOG_STREAMS_PER_ENVIRONMENT', 1, 10_000),
    loginFailuresPerAddress: int(env, 'LOGIN_FAILURES_PER_ADDRESS', 1),
    loginFailuresPerAccount: int(env, 'LOGIN_FAILURES_PER_ACCOUNT', 1),
    loginFailureWindowSeconds: int(env, 'LOGIN_FAILURE_WINDOW_SECONDS', 1, 86_400),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 0, 600_000),
    queueName: env.QUEUE_NAME || 'device-events',
    queueShards: int(env, 'QUEUE_SHARDS', 1, 1024),
    smtpUrl: env.SMTP_URL || null,
    mailFrom: env.MAIL_FROM || 'gridgate <noreply@localhost>',
    feedbackMailTo: (env.FEEDBACK_MAIL_TO ?? '').split(',').map((a) => a.trim()).filter((a) => a !== ''),
    environmentAddLimit: int(env, 'ENVIRONMENT_ADD_LIMIT', 0, 1_000_000),
    mailRetryBaseMs: int(env, 'MAIL_RETRY_BASE_MS', 1, 3_600_000),
    mailRetryMaxMs: int(env, 'MAIL_RETRY_MAX_MS', 1, 86_400_000),
    notificationDigestSeconds: int(env, 'NOTIFICATION_DIGEST_SECONDS', 0, 86_400),
    notificationAlertQuietSeconds: int(env, 'NOTIFICATION_ALERT_QUIET_SECONDS', 0, 604_800),
    firmwareMaxBytes: int(env, 'FIRMWARE_MAX_BYTES', 1, 1024 * 1024 * 1024),
    firmwareCacheBytes: int(env, 'FIRMWARE_CACHE_BYTES', 0, 2 ** 31),
    outboundAllowedHosts: (env.OUTBOUND_ALLOWED_HOSTS ?? '').split(',').map((h) => h.trim().toLowerCase()).filter((h) => h !== ''),
    outboundTimeoutMs: int(env, 'OUTBOUND_TIMEOUT_MS', 10, 120_000),
    outboundMaxResponseBytes: int(env, 'OUTBOUND_MAX_RESPONSE_BYTES', 0, 16 * 1024 * 1024),
    outboundCaFile: env.OUTBOUND_CA_FILE || null,
    thresholdEvaluation: onOff(env, 'THRESHOLD_EVALUATION'),
    localHandoff: onOff(env, 'LOCAL_HANDOFF'),
    localHandoffClaimMs: int(env, 'LOCAL_HANDOFF_CLAIM_MS', 1000, 3_600_000),
    queueBatchDelayMs: int(env, 'QUEUE_BATCH_DELAY_MS', 0, 1000),
    connectivityCheckMs: int(env, 'CONNECTIVITY_CHECK_MS', 100, 60_000),
    auditLog: onOff(env, 'AUDIT_LOG'),
    exportRetentionHours: int(env, 'EXPORT_RETENTION_HOURS', 1, 24 * 366),
    exportConcurrency: int(env, 'EXPORT_CONCURRENCY', 1, 64),
  };
}
