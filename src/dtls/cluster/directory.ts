// Where the nodes of a cluster find each other: the node ids in use and the inter-node address of each. The DTLS
// cluster only asks; the gateway provides the directory (src/gateway/cluster-registry.ts keeps it in Redis).

export interface NodeAddress {
  address: string;
  port: number;
  /** the node reads batches (messages.ts); false: a node of the version before, sent one message a datagram */
  batches?: boolean;
}

export interface NodeDirectory {
  /** this node's id once joined (cid.ts puts it in every CID this node issues) */
  readonly nodeId: number;
  /** the live nodes known, by id */
  readonly nodes: ReadonlyMap<number, NodeAddress>;
  /** takes a node id and announces this node; resolves with the id */
  join(): Promise<number>;
  /** a node not known yet (a CID named it): asks the directory again, rate-limited */
  lookup(id: number): Promise<NodeAddress | undefined>;
  /** a known live node, without asking */
  peer(id: number): NodeAddress | undefined;
  /** gives the id back and announces the leave */
  leave(): Promise<void>;
}
