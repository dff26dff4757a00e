// The settings of a CID-routed cluster of gateway nodes (DTLS_CLUSTER_*), declared once: `config.dtlsCluster` (null
// unless DTLS_CLUSTER_PORT is set) and the table in docs/configuration.md come from them. Plain data: the kernel's
// settings kit is imported for its types only (src/app/settings.ts says why).
import { networkInterfaces } from 'node:os';
import type { Settings, SettingsOf } from '../../app/settings.ts';
import { DEFAULT_BATCH_BYTES, DEFAULT_BATCH_WINDOW_MS } from './messages.ts';

/** Records in a row through one other gateway node after which a session moves there (DTLS_CLUSTER_HANDOVER_AFTER). */
export const DEFAULT_HANDOVER_AFTER = 4;

/** The first non-loopback IPv4 address of this host (what the other nodes of a cluster most likely reach it at). */
function hostAddress(): string {
  const all = Object.values(networkInterfaces()).flat();
  return all.find((i) => i && i.family === 'IPv4' && !i.internal)?.address ?? '127.0.0.1';
}

/** `config.dtlsCluster`: null unless DTLS_CLUSTER_PORT is set. */
export const DTLS_CLUSTER_SETTINGS = {
  dtlsCluster: {
    kind: 'group',
    when: 'DTLS_CLUSTER_PORT',
    settings: {
      port: {
        kind: 'int',
        env: 'DTLS_CLUSTER_PORT',
        default: 0,
        min: 0,
        max: 65_535,
        defaultText: 'unset → off (one gateway node)',
        description:
          "UDP port for the other gateway nodes of a CID-routed cluster ([fleet](fleet.md#cid-routing)): a node forwards a DTLS record whose Connection ID names another node there, and relays that node's answer to the device (`0`: any free port). Every node of the deployment needs the same `SECRET_KEY` and `QUEUE_NAME`",
      },
      address: {
        kind: 'custom',
        env: 'DTLS_CLUSTER_ADDRESS',
        accepts: 'an IP address',
        defaultText: "this host's first non-loopback IPv4 address, else 127.0.0.1",
        description: 'address the cluster port is bound on and the other nodes reach it at (registered in Redis)',
        parse: (raw: string | undefined): string => raw ?? hostAddress(),
      },
      leaseMs: {
        kind: 'int',
        env: 'DTLS_CLUSTER_LEASE_MS',
        default: 10_000,
        min: 300,
        max: 3_600_000,
        description:
          'a node holds its node id in Redis for this long, renewed every third of it; a node that stops is forgotten this much later (one that shuts down cleanly, at once)',
      },
      batchBytes: {
        kind: 'int',
        env: 'DTLS_CLUSTER_BATCH_BYTES',
        default: DEFAULT_BATCH_BYTES,
        min: 0,
        max: 65_507,
        description:
          'largest datagram between two gateway nodes: the forwarded records and relayed answers bound for one node within one event-loop turn travel together in one datagram up to this size (one record larger than it goes alone); `0`: each in a datagram of its own, sent at once ([fleet](fleet.md#cid-routing))',
      },
      batchWindowMs: {
        kind: 'int',
        env: 'DTLS_CLUSTER_BATCH_WINDOW_MS',
        default: DEFAULT_BATCH_WINDOW_MS,
        min: 0,
        max: 100,
        description:
          'under load (a record within this long after the previous datagram to the other nodes left), such a datagram waits this long for more records before it leaves, instead of leaving at the end of the event-loop turn; a record that comes alone never waits. `0`: only the records of one turn travel together',
      },
      handoverAfter: {
        kind: 'int',
        env: 'DTLS_CLUSTER_HANDOVER_AFTER',
        default: DEFAULT_HANDOVER_AFTER,
        min: 0,
        max: 1000,
        description:
          "a session whose device's records reached this node through one other gateway node this many times in a row (a NAT rebinding, or a balancer that picked another node) moves to that node between two exchanges: its exact state goes through Redis, the next record is carried on there, and its records stop costing two nodes ([fleet](fleet.md#cid-routing)). A device whose datagrams alternate between nodes never builds such a streak. `0`: never; a session stays on the node of its handshake",
      },
    },
  },
} as const satisfies Settings;

declare module '../../app/config.ts' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type -- merged into the kernel's Config
  interface Config extends SettingsOf<typeof DTLS_CLUSTER_SETTINGS> {}
}
