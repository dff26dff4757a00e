import { defineConfig } from 'vitest/config';
import DurationsReporter from './test/support/durations-reporter.ts';

/**
 * Tests that start something beyond the stores every test uses (PostgreSQL and Redis): the service (in the test's
 * process or as one of its own), a child process (a protocol peer, the CLI, a private PostgreSQL or Redis), a browser
 * or a fleet. `npx vitest run --project unit` runs the rest: the fast ones.
 */
const SYSTEM = [
  'test/fleet/**/*.test.ts', // fleets, a Redis Cluster, nginx, Prometheus, the fleet CLI
  'test/console/**/*.test.ts', // Chromium against the service
  'test/docs/**/*.test.ts', // the README's and walkthrough's commands against the service as a process
  'test/bench/cli.test.ts', // the bench CLI as a process
  'test/service.test.ts', // the service as a process
  'test/app/{db,redis}-outage.test.ts', 'test/app/read-replica.test.ts', // a private PostgreSQL or Redis, stopped and started
  'test/accounts/users.test.ts', 'test/monitoring/environments.test.ts', // the admin CLI as a process
  'test/coap/{accepted,certificate-coap,coaps-e2e,fuzz,plain-coap,shutdown,upload-budget}.test.ts', // the service; libcoap and mbedTLS clients
  'test/dtls/{certificates,cid,fuzz,gnutls,interop,psk-identity,resumption,robustness,slots}.test.ts', // openssl and gnutls DTLS peers
  'test/tls/server.test.ts', // openssl s_client as the peer
  'test/pki/{certificate-devices,https-dispatch,certs}.test.ts', // the service; npm run certs
  // the service, in the test's process or as processes of its own
  'test/gateway/{cid-routing,coaps-kept-sessions,deep-json,https-device-port,refusal-log,two-instances,webhook-body-limit}.test.ts',
  'test/connectivity/{compare,dry-run,live-log,trust}.test.ts',
  'test/monitoring/{claimed-types,customer-e2e,issues,link-propagation,partitions,report-dates,thresholds}.test.ts',
  'test/notifications/{issue-notifications,supplier-alerts}.test.ts',
  'test/pipeline/*-e2e.test.ts',
  'test/pipeline/{durable-completion,fair-share,given-up,local-handoff,outbound,pg-outage-layouts,store-outage,worker-start}.test.ts',
];

export default defineConfig({
  test: {
    // both projects need the test database the global setup makes (and system's test/console the console it builds); it
    // runs once however many projects run
    globalSetup: ['test/support/global-setup-once.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', new DurationsReporter({ outputFile: process.env.TEST_DURATIONS_FILE })],
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: SYSTEM } },
      { extends: true, test: { name: 'system', include: SYSTEM } },
    ],
  },
});
