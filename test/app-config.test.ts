import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../src/app/config.ts';

describe('configuration', () => {
  it('the configuration table (docs/configuration.md) lists every variable the service reads', () => {
    const readme = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');
    const missing = Object.keys(CONFIG_VARIABLES).filter((name) => !readme.includes(`| \`${name}\` |`));
    expect(missing).toEqual([]);
  });

  it('the configuration table (docs/configuration.md) gives every variable the default config.ts documents', () => {
    const readme = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');
    const shown = new Map<string, string>();
    for (const m of readme.matchAll(/^\| `([A-Z0-9_]+)` \| (.*?) \|/gm)) shown.set(m[1], m[2].replaceAll('`', ''));
    const differing = Object.entries(CONFIG_VARIABLES)
      .filter(([name, [def]]) => shown.get(name) !== def.replaceAll('`', ''))
      .map(([name, [def]]) => ({ name, configTs: def, readme: shown.get(name) }));
    expect(differing).toEqual([]);
  });

  it('a default is written once: the value used is the one the table documents, and a variable it does not document is refused', () => {
    const documented = CONFIG_VARIABLES.HTTPS_HANDSHAKE_RATE_PER_ADDRESS;
    const keep = CONFIG_VARIABLES.DTLS_KEEP_SESSIONS;
    try {
      CONFIG_VARIABLES.HTTPS_HANDSHAKE_RATE_PER_ADDRESS = ['7', documented[1]];
      CONFIG_VARIABLES.DTLS_KEEP_SESSIONS = ['off', keep[1]];
      const c = loadConfig({});
      expect(c.httpsLimits.handshakeRatePerAddress).toBe(7);
      expect(c.dtlsKeepSessions).toBe(false);
      delete CONFIG_VARIABLES.HTTPS_HANDSHAKE_RATE_PER_ADDRESS;
      expect(() => loadConfig({})).toThrow(/reads HTTPS_HANDSHAKE_RATE_PER_ADDRESS, which CONFIG_VARIABLES does not document/);
    } finally {
      CONFIG_VARIABLES.HTTPS_HANDSHAKE_RATE_PER_ADDRESS = documented;
      CONFIG_VARIABLES.DTLS_KEEP_SESSIONS = keep;
    }
    expect(loadConfig({}).httpsLimits.handshakeRatePerAddress).toBe(100);
  });

  it('DTLS limits come from the environment and are validated', () => {
    const c = loadConfig({ DTLS_MAX_SESSIONS_PER_ADDRESS: '7', DTLS_HANDSHAKE_RATE_PER_ADDRESS: '3', DTLS_MTU: '600' });
    expect(c.dtls).toMatchObject({ maxSessionsPerAddress: 7, handshakeRatePerAddress: 3, mtu: 600, maxSessions: 10_000 });
    expect(() => loadConfig({ DTLS_MTU: '100' })).toThrow(/DTLS_MTU must be an integer between 256/);
  });

  it('the DTLS cluster is off unless DTLS_CLUSTER_PORT is set, and its settings are validated', () => {
    expect(loadConfig({}).dtlsCluster).toBeNull();
    expect(loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_ADDRESS: '10.0.0.7' }).dtlsCluster).toEqual({ port: 5700, address: '10.0.0.7', leaseMs: 10_000, batchBytes: 1400, batchWindowMs: 1, handoverAfter: 4 });
    expect(loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_BATCH_BYTES: '0' }).dtlsCluster?.batchBytes).toBe(0);
    expect(loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_HANDOVER_AFTER: '0' }).dtlsCluster?.handoverAfter).toBe(0);
    expect(() => loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_HANDOVER_AFTER: '-1' })).toThrow(/DTLS_CLUSTER_HANDOVER_AFTER must be an integer between 0 and 1000/);
    expect(loadConfig({ DTLS_CLUSTER_PORT: '0' }).dtlsCluster?.address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(() => loadConfig({ DTLS_CLUSTER_PORT: '70000' })).toThrow(/DTLS_CLUSTER_PORT must be an integer between 0 and 65535/);
    expect(() => loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_LEASE_MS: '10' })).toThrow(/DTLS_CLUSTER_LEASE_MS must be an integer between 300/);
  });
});
