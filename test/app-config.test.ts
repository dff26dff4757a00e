import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { declarations, loadSettings, type IntSetting, type Setting } from '../src/app/settings.ts';
import { DTLS_DEFAULTS } from '../src/dtls/limits.ts';
import { DEFAULT_SUPPLIER_CODE_LIMITS } from '../src/sandbox/limits.ts';
import { loadConfig, SETTINGS, SETTINGS_TABLES } from '../src/settings.ts';
import { CONFIGURATION_DOC, withGeneratedTables } from '../scripts/config-docs.ts';

const all: Setting[] = declarations(SETTINGS);
const ints = all.filter((s): s is IntSetting => s.kind === 'int');

/** The lines of `next` that are not in `prev` (+) and those of `prev` not in `next` (-). */
function lineDiff(prev: string, next: string): string {
  const a = prev.split('\n');
  const b = next.split('\n');
  return [...a.filter((l) => !b.includes(l)).map((l) => `- ${l}`), ...b.filter((l) => !a.includes(l)).map((l) => `+ ${l}`)].join('\n');
}

const withoutComments = (code: string) => code.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

describe('configuration', () => {
  it('docs/configuration.md holds the tables generated from the declarations (npm run docs:config writes them)', () => {
    const committed = readFileSync(CONFIGURATION_DOC, 'utf8');
    const generated = withGeneratedTables(committed);
    expect(lineDiff(committed, generated), 'run npm run docs:config').toBe('');
  });

  it('documents every declared variable once, with its default and what it accepts', () => {
    const doc = readFileSync(CONFIGURATION_DOC, 'utf8');
    const rows = [...doc.matchAll(/^\| `([A-Z0-9_]+)` \| (.+?) \| (.+?) \| (.+) \|$/gm)].map((m) => m[1]);
    expect(rows).toEqual(all.map((s) => s.env));
    expect(new Set(rows).size).toBe(rows.length);
    expect(doc).toContain('| `DTLS_MTU` | `1200` | 256 – 65000 |');
    expect(doc).toContain('| `TOKEN_LIFETIME_SECONDS` | `2592000` (30 days) | 60 or more |');
  });

  it('reads no variable that is not declared, and nothing but the composition root reads process.env', () => {
    const read = new Set<string>();
    const env = new Proxy({ DTLS_CLUSTER_PORT: '5700', COAP_PORT: '5683' } as Record<string, string | undefined>, {
      get: (target, name) => {
        if (typeof name === 'string') read.add(name);
        return target[name as string];
      },
    });
    loadConfig(env);
    expect([...read].filter((name) => !all.some((s) => s.env === name))).toEqual([]);
    expect([...read].sort()).toEqual(all.map((s) => s.env).sort());
    // a declaration's parse sees only its own value and other declared settings: reading an undeclared one is refused
    const sneaky = {
      x: {
        kind: 'custom',
        env: 'X',
        accepts: '',
        defaultText: '',
        description: '',
        parse: (_raw: string | undefined, ctx: { get(s: Setting): unknown }) => ctx.get({ kind: 'str', env: 'UNDECLARED', default: null, description: '' }),
      },
    } as const;
    expect(() => loadSettings(sneaky, { UNDECLARED: 'x' })).toThrow(/UNDECLARED is read but not declared/);

    const src = path.join(import.meta.dirname, '../src');
    const readers = readdirSync(src, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && withoutComments(readFileSync(path.join(src, f), 'utf8')).includes('process.env'))
      .sort();
    expect(readers).toEqual(['main.ts', 'settings.ts']);
  });

  it('unset, every setting takes its declared default; DTLS_DEFAULTS and the supplier-code limits are those declarations', () => {
    const c = loadConfig({});
    expect(c.httpsLimits.handshakeRatePerAddress).toBe(100);
    expect(c.dtls).toEqual(DTLS_DEFAULTS);
    expect(c.supplierCode).toEqual(DEFAULT_SUPPLIER_CODE_LIMITS);
    expect(c).toMatchObject({
      apiPort: 8080,
      coapPort: null,
      dtlsKeepSessions: true,
      outboundAllowedHosts: [],
      roles: ['all'],
      mapStyleUrl: null,
      publicUrl: 'http://localhost:8080',
    });
    expect(loadConfig({ API_PORT: '9000' }).publicUrl).toBe('http://localhost:9000');
  });

  it('an integer outside its range is refused with the variable and the range in the message', () => {
    for (const s of ints) {
      const tooLow = String(s.min - 1);
      expect(() => loadConfig(s.env.startsWith('DTLS_CLUSTER_') ? { DTLS_CLUSTER_PORT: '5700', [s.env]: tooLow } : { [s.env]: tooLow }), s.env).toThrow(
        `${s.env} must be an integer between ${s.min} and ${s.max}, got "${tooLow}"`,
      );
      expect(() => loadConfig({ DTLS_CLUSTER_PORT: '5700', [s.env]: String(s.max + 1) }), s.env).toThrow(`${s.env} must be an integer between`);
      expect(() => loadConfig({ DTLS_CLUSTER_PORT: '5700', [s.env]: '12abc' }), s.env).toThrow(`${s.env} must be an integer between`);
    }
    expect(ints.length).toBeGreaterThan(60);
    expect(() => loadConfig({ AUDIT_LOG: 'yes' })).toThrow('AUDIT_LOG must be on or off, got "yes"');
    expect(() => loadConfig({ LOG_LEVEL: 'verbose' })).toThrow('LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "verbose"');
    expect(() => loadConfig({ MAP_STYLE_URL: 'ftp://x/style.json' })).toThrow(/MAP_STYLE_URL must be an http or https URL/);
    expect(() => loadConfig({ PUBLIC_URL: 'https://x.example/?a=1' })).toThrow(/PUBLIC_URL must be an http or https URL without query/);
    expect(() => loadConfig({ ROLE: 'api,cook' })).toThrow(/ROLE must be one or more of all, api, gateway, worker/);
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'a:1,b' })).toThrow(/REDIS_CLUSTER_NODES must be host:port/);
    expect(() => loadConfig({ SECRET_KEY: 'abc' })).toThrow('SECRET_KEY must be 64 hex digits');
  });

  it('a worker without the api role must name its monitoring core; the CLI role overrides ROLE', () => {
    expect(() => loadConfig({}, 'worker')).toThrow(/MONITORING_CORE_URL must be set for a worker without the api role/);
    expect(loadConfig({ MONITORING_CORE_URL: 'http://api:8080' }, 'worker')).toMatchObject({ roles: ['worker'], monitoringCoreUrl: 'http://api:8080' });
    expect(loadConfig({ ROLE: 'worker' }, 'api,gateway').roles).toEqual(['api', 'gateway']);
  });

  it('each group of the table is declared in the file it names', () => {
    for (const t of SETTINGS_TABLES) {
      const text = readFileSync(path.join(import.meta.dirname, '..', t.source), 'utf8');
      for (const s of declarations(t.settings)) expect(text, `${s.env} in ${t.source}`).toContain(`env: '${s.env}'`);
    }
  });

  it('DTLS limits come from the environment and are validated', () => {
    const c = loadConfig({ DTLS_MAX_SESSIONS_PER_ADDRESS: '7', DTLS_HANDSHAKE_RATE_PER_ADDRESS: '3', DTLS_MTU: '600' });
    expect(c.dtls).toMatchObject({ maxSessionsPerAddress: 7, handshakeRatePerAddress: 3, mtu: 600, maxSessions: 10_000 });
    expect(() => loadConfig({ DTLS_MTU: '100' })).toThrow(/DTLS_MTU must be an integer between 256/);
  });

  it('the DTLS cluster is off unless DTLS_CLUSTER_PORT is set, and its settings are validated', () => {
    expect(loadConfig({}).dtlsCluster).toBeNull();
    expect(loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_ADDRESS: '10.0.0.7' }).dtlsCluster).toEqual({
      port: 5700,
      address: '10.0.0.7',
      leaseMs: 10_000,
      batchBytes: 1400,
      batchWindowMs: 1,
      handoverAfter: 4,
    });
    expect(loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_BATCH_BYTES: '0' }).dtlsCluster?.batchBytes).toBe(0);
    expect(loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_HANDOVER_AFTER: '0' }).dtlsCluster?.handoverAfter).toBe(0);
    expect(() => loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_HANDOVER_AFTER: '-1' })).toThrow(
      /DTLS_CLUSTER_HANDOVER_AFTER must be an integer between 0 and 1000/,
    );
    expect(loadConfig({ DTLS_CLUSTER_PORT: '0' }).dtlsCluster?.address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(() => loadConfig({ DTLS_CLUSTER_PORT: '70000' })).toThrow(/DTLS_CLUSTER_PORT must be an integer between 0 and 65535/);
    expect(() => loadConfig({ DTLS_CLUSTER_PORT: '5700', DTLS_CLUSTER_LEASE_MS: '10' })).toThrow(/DTLS_CLUSTER_LEASE_MS must be an integer between 300/);
  });
});
