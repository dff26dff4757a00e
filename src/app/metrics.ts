import { Counter, Gauge, Histogram, register } from 'prom-client';

/**
 * Every metric of the service on `/metrics`, named `gridgate_*`. A role registers the collectors of
 * what it runs (queue depth, DTLS sessions) with `gaugeFrom`; counters are module singletons.
 *
 * Two rules keep the fleet's dashboard (deploy/grafana/dashboards/fleet.json) truthful:
 * - A gauge of something shared that every process reads for itself (queue depth, read from Redis by every worker)
 *   is exported by each of them and aggregated with `max`, never `sum`. Every worker keeps exporting it rather than one
 *   elected exporter: no election to get wrong, and the depth stays visible while any worker is up.
 * - No metric label is named like a label Prometheus attaches to the target: `job`, `instance`, and the fleet's own
 *   `node` and `role` (deploy/prometheus/prometheus.yml, the targets.json of `npm run fleet`). Prometheus would rename
 *   ours to `exported_node` and so on; a gateway's node id in the cluster is `gateway_node`.
 *   test/fleet/dashboard.test.ts has a real Prometheus scrape two processes and checks both rules on every panel.
 */
export const metrics = {
  deviceRequests: new Counter({ name: 'gridgate_gateway_device_requests_total', help: 'Device requests received', labelNames: ['protocol'] }),
  dtlsSessions: new Counter({
    name: 'gridgate_dtls_sessions_started_total',
    help: 'DTLS sessions a gateway started serving, by how: handshake (full), resumption (abbreviated handshake), kept (carried on from a state another process kept: no handshake)',
    labelNames: ['origin'],
  }),
  handshakeFailures: new Counter({ name: 'gridgate_gateway_handshake_failures_total', help: 'Failed device handshakes', labelNames: ['protocol'] }),
  refused: new Counter({
    name: 'gridgate_gateway_device_requests_refused_total',
    help: 'Requests of authenticated devices refused at the gateway',
    labelNames: ['protocol', 'reason'],
  }),
  coapMalformed: new Counter({
    name: 'gridgate_gateway_coap_malformed_total',
    help: 'CoAP datagrams dropped (or reset) as malformed',
    labelNames: ['protocol'],
  }),
  coapFailures: new Counter({
    name: 'gridgate_gateway_coap_failures_total',
    help: 'CoAP datagrams or answers whose handling threw (the exchange dropped, the listener kept)',
    labelNames: ['protocol'],
  }),
  jobAttempts: new Counter({
    name: 'gridgate_queue_job_attempts_total',
    help: 'Runs of queued device jobs by outcome: completed, delayed (a store was unavailable: run again later), retried (failed, attempts left), failed (failed for good)',
    labelNames: ['outcome'],
  }),
  queuedBatches: new Counter({ name: 'gridgate_queue_batches_total', help: 'Jobs a gateway queued for its device requests (each holds a batch of them)' }),
  queuedBatchItems: new Counter({
    name: 'gridgate_queue_batch_items_total',
    help: 'Device requests queued in those jobs: divided by gridgate_queue_batches_total, the mean batch',
  }),
  jobsFailed: new Counter({ name: 'gridgate_queue_jobs_failed_total', help: 'Device jobs failed for good (in the failed set: npm run admin -- retry-failed)' }),
  reportsStored: new Counter({ name: 'gridgate_reports_stored_total', help: 'Condition reports stored by the monitoring core' }),
  sandboxRuns: new Counter({
    name: 'gridgate_sandbox_runs_total',
    help: 'Runs of supplier code by kind (handler, parser) and outcome (ok, or the failure kind)',
    labelNames: ['kind', 'outcome'],
  }),
  notifications: new Counter({
    name: 'gridgate_notifications_total',
    help: 'Mails by what became of them: queued, sent, failed (refused for good, or no SMTP_URL), retried (a try the server did not take; the mail stays queued)',
    labelNames: ['state'],
  }),
  sandboxSeconds: new Histogram({
    name: 'gridgate_sandbox_run_seconds',
    help: 'Wall time of one run of supplier code',
    labelNames: ['kind'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  }),
};

type GaugeReader = () => Promise<[Record<string, string>, number][]> | [Record<string, string>, number][];
const readers = new Map<string, { read: GaugeReader }>();

/**
 * A metric read when `/metrics` is scraped: `read` gives the value per label set (for a counter, the running total a
 * component keeps itself: plain numbers, no label lookup per event on a hot path). A second registration of the same
 * name (another instance in this process, as in tests) replaces the reader.
 */
function readAtScrape(type: 'gauge' | 'counter', name: string, help: string, labelNames: string[], read: GaugeReader): void {
  const known = readers.get(name);
  if (known) {
    known.read = read;
    return;
  }
  const holder = { read };
  readers.set(name, holder);
  const config = { name, help, labelNames };
  if (type === 'gauge') {
    new Gauge({
      ...config,
      async collect() {
        this.reset();
        for (const [labels, value] of await holder.read()) this.set(labels, value);
      },
    });
  } else {
    new Counter({
      ...config,
      async collect() {
        this.reset();
        for (const [labels, value] of await holder.read()) this.inc(labels, value);
      },
    });
  }
}

/** A gauge read when `/metrics` is scraped (readAtScrape). */
export const gaugeFrom = (name: string, help: string, labelNames: string[], read: GaugeReader): void => readAtScrape('gauge', name, help, labelNames, read);
/** A counter whose running totals are read when `/metrics` is scraped (readAtScrape). */
export const counterFrom = (name: string, help: string, labelNames: string[], read: GaugeReader): void => readAtScrape('counter', name, help, labelNames, read);

export { register as metricsRegistry };
