/**
 * The coaps listener as one node of a CID-routed cluster (DTLS_CLUSTER_PORT; src/dtls/cluster/): its keys, Redis and
 * metrics from the service's context.
 */
import { createSecretKey } from 'node:crypto';
import type { AppContext } from '../app/context.ts';
import { gaugeFrom, metrics } from '../app/metrics.ts';
import { DtlsClusterNode } from '../dtls/cluster/node.ts';
import type { ClusterEvent } from '../dtls/cluster/node.ts';
import type { DtlsServer } from '../dtls/server.ts';

const FORWARDED: Partial<Record<ClusterEvent, { kind: string; direction: string }>> = {
  forwarded_out: { kind: 'record', direction: 'out' },
  forwarded_in: { kind: 'record', direction: 'in' },
  answer_out: { kind: 'answer', direction: 'out' },
  answer_in: { kind: 'answer', direction: 'in' },
};

/** Joins the cluster (null when DTLS_CLUSTER_PORT is unset): `dtls` then issues CIDs naming this node and forwards the others'. */
export async function joinDtlsCluster(ctx: AppContext, dtls: DtlsServer): Promise<DtlsClusterNode | null> {
  const c = ctx.config.dtlsCluster;
  if (!c) return null;
  const node = await DtlsClusterNode.start({
    redis: ctx.redis,
    log: ctx.log,
    deployment: ctx.config.queueName,
    key: createSecretKey(ctx.keys.dtlsCluster),
    address: c.address,
    port: c.port,
    leaseMs: c.leaseMs,
    batchBytes: c.batchBytes,
    batchWindowMs: c.batchWindowMs,
    // a record of a node that is gone (or of this node before a restart) is carried on from the kept sessions (DTLS_KEEP_SESSIONS)
    takeOverSession: (cid, datagram, from) => dtls.claimKept(cid, datagram, from),
    count: (event) => {
      const forwarded = FORWARDED[event];
      if (forwarded) metrics.clusterForwarded.inc(forwarded);
      else metrics.clusterFailures.inc({ reason: event });
    },
  }, dtls);
  gaugeFrom('gridgate_dtls_cluster_sessions', 'Established DTLS sessions of this gateway node, by its node id in the cluster', ['node'], () => [[{ node: String(node.nodeId) }, dtls.sessionCount]]);
  gaugeFrom('gridgate_dtls_cluster_nodes', 'Gateway nodes of the cluster this node knows of (itself included)', [], () => [[{}, node.registry.nodes.size]]);
  ctx.log.info({ nodeId: node.nodeId, address: c.address, port: node.socket.address().port }, 'dtls cluster: joined');
  return node;
}
