/**
 * The coaps listener as one node of a CID-routed cluster (DTLS_CLUSTER_PORT; src/dtls/cluster/): its keys, Redis and
 * metrics from the service's context.
 *
 * A session whose CID names a node that is gone is carried on by whichever node its record reaches first; that node
 * writes down that it holds it (`{<QUEUE_NAME>:dtls-cluster}:holder:<cid>`, for as long as the session may be
 * idle), and a record of it that reaches another node later is forwarded there instead of being claimed from Redis a
 * second time. A second claim would take the session from a live node with the state it last wrote (lease renewal),
 * which may predate the device's last exchange: a retransmission the holder would have answered from its
 * deduplication would be queued again. Records of live nodes' own CIDs are forwarded by the CID alone.
 */
import { createSecretKey } from 'node:crypto';
import type { AppContext } from '../app/context.ts';
import { counterFrom, gaugeFrom } from '../app/metrics.ts';
import { DtlsClusterNode } from '../dtls/cluster/node.ts';
import { NodeRegistry } from './cluster-registry.ts';
import type { ClusterEvent } from '../dtls/cluster/node.ts';
import { cidNode } from '../dtls/cluster/cid.ts';
import type { DtlsServer, DtlsSession } from '../dtls/server.ts';

const FORWARDED: Partial<Record<ClusterEvent, { kind: string; direction: string }>> = {
  forwarded_out: { kind: 'record', direction: 'out' },
  forwarded_in: { kind: 'record', direction: 'in' },
  answer_out: { kind: 'answer', direction: 'out' },
  answer_in: { kind: 'answer', direction: 'in' },
};

/** A gateway node's place in the cluster: its node, and the hand-over of sessions whose devices now reach another node. */
export interface DtlsCluster {
  node: DtlsClusterNode;
  /**
   * Called when an answer went to a device whose records reach this node through another one: once its newest records
   * all came through one other node, DTLS_CLUSTER_HANDOVER_AFTER in a row, and `settled()` says the exchange is over
   * (looked at once the answer has left: nothing pending, nothing half sent), the session moves there
   * (DtlsServer.handOver), so the device's records stop costing two nodes. A device whose datagrams alternate between
   * nodes never builds a streak.
   */
  answered(session: DtlsSession, settled: () => boolean): void;
  close(): Promise<void>;
}

/** Joins the cluster (null when DTLS_CLUSTER_PORT is unset): `dtls` then issues CIDs naming this node and forwards the others'. */
export async function joinDtlsCluster(ctx: AppContext, dtls: DtlsServer): Promise<DtlsCluster | null> {
  const c = ctx.config.dtlsCluster;
  if (!c) return null;
  const holderKey = (cid: Buffer) => `{${ctx.config.queueName}:dtls-cluster}:holder:${cid.toString('hex')}`;
  /** A node that is gone's session: to the live node that carried it on, else carried on here. */
  const takeOver = async (cid: Buffer, datagram: Buffer, from: { address: string; port: number }): Promise<boolean> => {
    const holder = await ctx.redis.get(holderKey(cid)).catch(() => null);
    // forwardTo is false for this node itself: a session handed over to it is claimed here
    if (holder !== null && node.forwardTo(Number(holder), datagram, from)) return true;
    return dtls.claimKept(cid, datagram, from);
  };
  const counts = new Map<ClusterEvent, number>();
  const node: DtlsClusterNode = await DtlsClusterNode.start(
    {
      log: ctx.log,
      // the node ids and inter-node addresses of this deployment, leased in Redis
      directory: (self) => new NodeRegistry(ctx.redis, ctx.log, ctx.config.queueName, self, c.leaseMs),
      key: createSecretKey(ctx.keys.dtlsCluster),
      address: c.address,
      port: c.port,
      batchBytes: c.batchBytes,
      batchWindowMs: c.batchWindowMs,
      // a record of a node that is gone (or of this node before a restart) is carried on from the kept sessions (DTLS_KEEP_SESSIONS)
      takeOverSession: takeOver,
      // a plain tally per event (several per forwarded record), turned into the two counters when /metrics is read
      count: (event) => {
        counts.set(event, (counts.get(event) ?? 0) + 1);
      },
    },
    dtls,
  );
  dtls.on('session', (session: DtlsSession) => {
    const cid = session.connectionId;
    if (!session.restored || !cid || cidNode(cid) === node.nodeId) return;
    ctx.redis.set(holderKey(cid), String(node.nodeId), 'PX', ctx.config.dtls.idleTimeoutMs).catch((err: Error) => {
      ctx.log.warn({ err: err.message }, 'dtls cluster: could not note a session carried on here; another node may claim it again');
    });
  });
  counterFrom(
    'gridgate_dtls_cluster_forwarded_total',
    "Records and answers between the gateway nodes of a CID-routed cluster (several to an inter-node datagram under load): kind record (a device's record for the node its CID names) or answer (that node's answer, sent to the device by the node the record came to); direction out (sent) or in (received)",
    ['kind', 'direction'],
    () => [...counts].flatMap(([event, n]) => (FORWARDED[event] ? [[FORWARDED[event], n] as [Record<string, string>, number]] : [])),
  );
  counterFrom(
    'gridgate_dtls_cluster_failures_total',
    'Records and inter-node datagrams dropped: unknown_node (the CID names no live node), no_session (the named node holds no such session), unauthenticated (an inter-node datagram without a valid MAC, or stale), send_failed',
    ['reason'],
    () => [...counts].flatMap(([event, n]) => (FORWARDED[event] ? [] : [[{ reason: event }, n] as [Record<string, string>, number]])),
  );
  // gateway_node, not node: Prometheus attaches the fleet's own `node` target label, and a metric label of that name became exported_node
  gaugeFrom('gridgate_dtls_cluster_sessions', 'Established DTLS sessions of this gateway node, by its node id in the cluster', ['gateway_node'], () => [
    [{ gateway_node: String(node.nodeId) }, dtls.sessionCount],
  ]);
  gaugeFrom('gridgate_dtls_cluster_nodes', 'Gateway nodes of the cluster this node knows of (itself included)', [], () => [[{}, node.registry.nodes.size]]);
  ctx.log.info({ nodeId: node.nodeId, address: c.address, port: node.socket.address().port }, 'dtls cluster: joined');
  let handedOver = 0;
  counterFrom(
    'gridgate_dtls_cluster_handovers_total',
    "Sessions this node handed over to the node their devices' records now reach (DTLS_CLUSTER_HANDOVER_AFTER)",
    [],
    () => [[{}, handedOver]],
  );
  return {
    node,
    answered(session, settled) {
      if (c.handoverAfter === 0 || session.relayStreak < c.handoverAfter || !session.connectionId) return;
      const cid = session.connectionId;
      setImmediate(() => {
        const to = node.relayNode(session.relay);
        if (to === undefined || !session.established || !settled()) return;
        // the other nodes (and this one) forward the session's records to its new node from now on; that node claims
        // it from Redis at its next record (takeOver above)
        void dtls
          .handOver(session, () => ctx.redis.set(holderKey(cid), String(to), 'PX', ctx.config.dtls.idleTimeoutMs))
          .then((moved) => {
            if (moved) handedOver++;
          });
      });
    },
    close: () => node.close(),
  };
}
