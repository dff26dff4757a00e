// What a fleet node's environment is made of: every setting of docs/configuration.md the operator set in the fleet's
// own environment (QUEUE_SHARDS, DTLS_*, SHUTDOWN_GRACE_MS, API_HOST, ...), under what the fleet decides for the node
// itself. Written once here so a setting added to CONFIG_VARIABLES reaches the nodes without touching the fleet.
import { CONFIG_VARIABLES } from '../../src/settings.ts';

/**
 * Settings the fleet gives each node itself, never the operator's value: the node's role and ports (each node has its
 * own, and nginx owns the public ones), the plain CoAP port (every gateway node would try to bind the same one and the
 * fleet does not balance it), its cluster port and address, the API its workers push to, and its state folder.
 */
export const FLEET_OWNED: ReadonlySet<string> = new Set([
  'ROLE',
  'API_PORT',
  'HTTPS_DEVICE_PORT',
  'COAPS_PORT',
  'COAP_PORT',
  'DTLS_CLUSTER_PORT',
  'DTLS_CLUSTER_ADDRESS',
  'MONITORING_CORE_URL',
  'DATA_DIR',
]);

/** A node's environment: each CONFIG_VARIABLES setting present in `parentEnv` (but the fleet's own), then `perNode` over them. */
export function nodeEnv(parentEnv: Readonly<Record<string, string | undefined>>, perNode: Readonly<Record<string, string>>): Record<string, string> {
  const passed: Record<string, string> = {};
  for (const name of Object.keys(CONFIG_VARIABLES)) {
    const value = parentEnv[name];
    if (value !== undefined && !FLEET_OWNED.has(name)) passed[name] = value;
  }
  return { ...passed, ...perNode };
}
