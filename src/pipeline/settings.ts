// The pipeline's settings: where workers push condition reports, how many device requests a worker runs at once, how
// the gateway batches them into jobs and hands them to a worker beside it, and what exec.sendRequest may reach.
// Declared once: `Config`'s fields and the table in docs/configuration.md come from these declarations.
import { ROLE, type Role } from '../app/config.ts';
import type { Settings, SettingsOf } from '../app/settings.ts';

/** MONITORING_CORE_URL; a worker without the api role cannot be its own monitoring core, so it must name one. */
function monitoringCoreUrl(raw: string | undefined, roles: Role[]): string | null {
  const alone = roles.includes('worker') && !roles.includes('api') && !roles.includes('all');
  // a worker's own port serves /health and /metrics only
  if (alone && raw === undefined)
    throw new Error("MONITORING_CORE_URL must be set for a worker without the api role: the URL of this deployment's API (e.g. http://api-host:8080)");
  return raw ?? null;
}

export const PIPELINE_SETTINGS = {
  monitoringCoreUrl: {
    kind: 'custom',
    env: 'MONITORING_CORE_URL',
    accepts: 'an http(s) URL',
    defaultText: "this process's API (roles `all`, or `api` with `worker`); required for a worker without `api`",
    description:
      "where workers push condition reports; when it is this process's own API (a loopback address on `API_PORT`, role `all` or `api` with `worker`) the worker stores them directly, without HTTP",
    parse: (raw, ctx): string | null => monitoringCoreUrl(raw, ctx.get(ROLE)),
  },
  workerConcurrency: {
    kind: 'int',
    env: 'WORKER_CONCURRENCY',
    default: 128,
    min: 1,
    max: 10_000,
    description:
      "device requests of one supplier (environment) whose code a worker process runs at once (handler, parser, the device's calls; a request whose writes only wait for PostgreSQL holds no slot): a supplier whose code is slow or whose devices flood waits for its own, never another's (fair share)",
  },
  queueBatchDelayMs: {
    kind: 'int',
    env: 'QUEUE_BATCH_DELAY_MS',
    default: 12,
    min: 0,
    max: 1000,
    description:
      'how long a gateway gathers device requests into one queued job, from the first of them (a job holds at most 64; while one is being queued the next keeps gathering until it is). Longer makes fewer, larger jobs and store statements, so less CPU per report, for up to that much more latency: at 2,000 CoAP reports/s, 6 ms gave 15 reports per job and 0.60-0.68 ms CPU per report, 12 ms 25 and 0.50 ms (p50 unchanged, 15-20 ms), 20 ms 41 and 0.49 ms with p50 27 ms. `0`: a job per event-loop turn',
  },
  localHandoff: {
    kind: 'onOff',
    env: 'LOCAL_HANDOFF',
    default: true,
    description:
      "`on` or `off`: a worker in the same process as the gateway (role `all`, or `gateway,worker`) runs the batches that gateway queues without fetching them from Redis: each is queued durably as a job delayed by `LOCAL_HANDOFF_CLAIM_MS`, handed over in memory, its delay renewed while it runs, and removed once what it stored is on disk; a failed run hands it back to the queue, and if the process dies it becomes due after the claim and any worker runs it (its writes are idempotent). Saves BullMQ's fetch and finish round trips per batch",
  },
  localHandoffClaimMs: {
    kind: 'int',
    env: 'LOCAL_HANDOFF_CLAIM_MS',
    default: 30_000,
    min: 1000,
    max: 3_600_000,
    description:
      "how long a batch taken by the worker beside its gateway stays out of other workers' reach (renewed every third of it while it runs): after a crash of that process its batches run elsewhere this much later",
  },
  outboundAllowedHosts: {
    kind: 'list',
    env: 'OUTBOUND_ALLOWED_HOSTS',
    lowerCase: true,
    defaultText: 'empty → none',
    description: 'comma-separated hosts `exec.sendRequest` may reach (HTTPS only); `*.example.com` matches its subdomains',
  },
  outboundTimeoutMs: {
    kind: 'int',
    env: 'OUTBOUND_TIMEOUT_MS',
    default: 3000,
    min: 10,
    max: 120_000,
    description: "time limit of one outbound request, connect to last byte; the device's answer waits for it, so keep it below `GATEWAY_WAIT_MS`",
  },
  outboundMaxResponseBytes: {
    kind: 'int',
    env: 'OUTBOUND_MAX_RESPONSE_BYTES',
    default: 65_536,
    min: 0,
    max: 16 * 1024 * 1024,
    description: 'response bytes kept of an outbound request; the rest is not read',
  },
  outboundCaFile: {
    kind: 'str',
    env: 'OUTBOUND_CA_FILE',
    accepts: 'a PEM file',
    default: null,
    description: "PEM file of CA certificates outbound requests trust besides Node's bundled roots (a private CA, or a test's self-signed certificate)",
  },
} as const satisfies Settings;

declare module '../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof PIPELINE_SETTINGS> {}
}
