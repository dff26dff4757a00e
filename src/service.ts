import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics } from 'prom-client';
import { metricsRegistry } from './app/metrics.ts';
import type { AppContext } from './app/context.ts';
import type { Role } from './app/config.ts';
import { createHttpApp } from './api/app.ts';
import { startRetention } from './monitoring/retention/prune.ts';
import { registerRoutes } from './routes.ts';
import { reportIngestRoutes } from './monitoring/reports/routes.ts';
import { startHttpsDeviceListener, type HttpsDeviceListener } from './gateway/https.ts';
import { startCoapDeviceListener, type CoapDeviceListener } from './gateway/coap.ts';
import { closeFirmware } from './gateway/firmware.ts';
import { ensureCertificates } from './pki/files.ts';
import { watchTrust } from './connectivity/supplier-certificates/trust.ts';
import { DeviceQueue } from './pipeline/queue.ts';
import { startMailWorker } from './mail/queue.ts';
import { startExportWorker } from './monitoring/exports/queue.ts';
import { startIssueNotifier } from './notifications/issue-notifier.ts';
import { supplierAlerts } from './notifications/supplier-alerts.ts';
import { startDeviceWorker, type DeviceWorker } from './pipeline/worker.ts';
import { isOwnApi } from './pipeline/monitoring-client.ts';

export interface RunningService {
  api: FastifyInstance | null;
  https: HttpsDeviceListener | null;
  coap: CoapDeviceListener | null;
  worker: DeviceWorker | null;
  apiPort(): number;
  /** Graceful: listeners stop accepting, in-flight jobs finish (bounded), queues close. */
  stop(): Promise<void>;
}

let defaultMetrics = false;

/** Starts the roles of one process: `all` is api + gateway + worker. */
export async function startService(ctx: AppContext, roles: Role[]): Promise<RunningService> {
  const has = (r: Role) => roles.includes('all') || roles.includes(r);
  if (!defaultMetrics) {
    collectDefaultMetrics({ prefix: 'gridgate_' });
    defaultMetrics = true;
  }
  // the device CA signs supplier certificates (api); the server certificate serves the device ports (gateway)
  if (has('api') || has('gateway')) {
    const written = await ensureCertificates(ctx.config);
    if (written.length > 0) ctx.log.info({ certsDir: ctx.config.certsDir, written }, 'created missing certificates');
  }
  let ready = false;
  let api: FastifyInstance | null = null;
  // every role answers /health and /metrics; the api role serves the REST interface beside them
  api = await createHttpApp(ctx);
  api.get('/health', { config: { apiVersion: false }, schema: { hide: true } }, async (_req, reply) => {
    if (!ready) return reply.status(503).send({ status: 'starting' });
    const problem = worker?.unhealthy() ?? null;
    if (problem) return reply.status(503).send({ status: 'unavailable', reason: problem });
    return { status: 'ok' };
  });
  api.get('/metrics', { config: { apiVersion: false }, schema: { hide: true } }, async (_req, reply) => {
    reply.header('content-type', metricsRegistry.contentType).send(await metricsRegistry.metrics());
  });
  let retention: { stop(): void } | null = null;
  if (has('api')) {
    await registerRoutes(api, ctx);
    await reportIngestRoutes(api, ctx);
    retention = startRetention(ctx);
  }
  await api.listen({ port: ctx.config.apiPort, host: ctx.config.apiHost });

  const apiPort = (api.server.address() as { port: number }).port;
  const monitoringCoreUrl = ctx.config.monitoringCoreUrl ?? `http://127.0.0.1:${apiPort}`;
  // a worker beside the API stores reports itself instead of posting them to its own port
  const worker = has('worker') ? startDeviceWorker(ctx, monitoringCoreUrl, { localMonitoringCore: has('api') && isOwnApi(monitoringCoreUrl, apiPort) }) : null;
  // mail (issue notifications, supplier alerts, command mails) is sent by the workers: src/mail/queue.ts
  const mail = has('worker') ? startMailWorker(ctx) : null;
  const issueNotifier = has('worker') ? startIssueNotifier(ctx) : null;
  // CSV exports (settings add-export) are written by the workers: src/monitoring/exports/queue.ts
  const exports = has('worker') ? startExportWorker(ctx) : null;
  // failures of supplier code are counted where they happen (worker, webhook, certificate identity); a worker also mails summaries falling due
  if (has('worker')) supplierAlerts(ctx).start();
  let queue: DeviceQueue | null = null;
  let https: HttpsDeviceListener | null = null;
  let coap: CoapDeviceListener | null = null;
  let trust: { stop(): Promise<void> } | null = null;
  if (has('gateway')) {
    // client certificates are checked against anchors in memory, kept current from here on (src/connectivity/supplier-certificates/trust.ts)
    trust = await watchTrust(ctx);
    queue = new DeviceQueue(ctx);
    await queue.ready();
    https = await startHttpsDeviceListener(ctx, queue, ctx.config.httpsDevicePort);
    coap = await startCoapDeviceListener(ctx, queue, { coapsPort: ctx.config.coapsPort, coapPort: ctx.config.coapPort });
  }
  if (worker) await worker.ready();
  ready = true;
  ctx.log.info(
    {
      roles,
      apiPort: (api.server.address() as { port: number }).port,
      httpsDevicePort: https?.port(),
      coapsPort: coap?.coapsPort(),
      coapPort: coap?.coapPort(),
    },
    'service ready',
  );

  return {
    api,
    https,
    coap,
    worker,
    apiPort: () => (api.server.address() as { port: number }).port,
    async stop() {
      ready = false;
      retention?.stop();
      // the gateway first: its requests in flight are answered while the worker still runs
      await Promise.all([https?.close(ctx.config.shutdownGraceMs), coap?.close(ctx.config.shutdownGraceMs)]);
      await closeFirmware(ctx);
      await trust?.stop();
      // jobs a worker does not finish in time stay in Redis (BullMQ hands them to the next worker)
      const grace = new Promise<void>((resolve) => setTimeout(resolve, ctx.config.shutdownGraceMs).unref());
      await Promise.race([Promise.all([worker?.close(), mail?.close(), issueNotifier?.stop(), exports?.close()]), grace]);
      await queue?.close();
      await supplierAlerts(ctx).close();
      await api.close();
    },
  };
}
