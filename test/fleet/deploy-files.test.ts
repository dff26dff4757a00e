// The deploy files are the tested ones: deploy/nginx/fleet.conf is the rendering of the template `npm run fleet --
// --balancer nginx` runs, valid for Debian's nginx; the compose fleet gives its gateways the limits the fleet sets behind
// nginx, only settings of docs/configuration.md, and ports that agree with the balancer, Prometheus and the nodes'
// defaults; Grafana's files parse. Fast: reads files and runs `nginx -t` only.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CONFIG_VARIABLES } from '../../src/settings.ts';
import { until } from '../support/until.ts';
import { COMPOSE_PORTS, deployNginxConfig, LIMITS_BEHIND_NGINX, NGINX, nginxConfig } from '../../scripts/fleet/nginx.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const STREAM_MODULE = ['/usr/lib/nginx/modules/ngx_stream_module.so', '/usr/lib64/nginx/modules/ngx_stream_module.so'].find((p) => existsSync(p));
const haveNginx = existsSync(NGINX);

interface Service {
  image?: string;
  build?: string;
  profiles?: string[];
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string | number>;
  ports?: string[];
  volumes?: string[];
  depends_on?: string[] | Record<string, { condition: string }>;
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
const fleet = Object.entries(services).filter(([, s]) => s.profiles?.includes('fleet'));
/** the gridgate containers (built from this repository) of the fleet, by role */
const nodes = fleet.filter(([, s]) => s.build !== undefined);
const role = (r: string) => nodes.filter(([, s]) => s.command?.[0] === r).map(([name]) => name);
const defaultOf = (name: string) => CONFIG_VARIABLES[name]![0];

const tmp = mkdtempSync(path.join(os.tmpdir(), 'gridgate-deploy-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** `nginx -t` of `conf` with a prefix folder of its own, as the fleet's nginx runs (never the system's configuration) */
function nginxTest(conf: string): { ok: boolean; output: string } {
  const dir = mkdtempSync(path.join(tmp, 'nginx-'));
  const file = path.join(dir, 'nginx.conf');
  writeFileSync(file, conf);
  const r = spawnSync(NGINX, ['-t', '-p', dir, '-c', file, '-e', path.join(dir, 'error.log')], { encoding: 'utf8' });
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

describe('deploy/nginx/fleet.conf: the template npm run fleet runs', () => {
  it('is the rendering of scripts/fleet/nginx.ts (regenerate: node scripts/fleet/nginx.ts --deploy > deploy/nginx/fleet.conf)', () => {
    expect(read('deploy/nginx/fleet.conf')).toBe(deployNginxConfig());
  });

  it("balances to the compose fleet's gateway and API services, on the ports their containers listen on by default", () => {
    const conf = read('deploy/nginx/fleet.conf');
    const upstream = (name: string) =>
      [...new RegExp(`upstream ${name} \\{([^}]*)\\}`).exec(conf)![1]!.matchAll(/server (\S+):(\d+)/g)].map((m) => `${m[1]}:${m[2]}`);
    expect(upstream('coaps')).toEqual(role('gateway').map((g) => `${g}:${defaultOf('COAPS_PORT')}`));
    expect(upstream('https')).toEqual(role('gateway').map((g) => `${g}:${defaultOf('HTTPS_DEVICE_PORT')}`));
    expect(upstream('api')).toEqual(role('api').map((a) => `${a}:${defaultOf('API_PORT')}`));
    expect(COMPOSE_PORTS).toEqual({
      coaps: Number(defaultOf('COAPS_PORT')),
      https: Number(defaultOf('HTTPS_DEVICE_PORT')),
      api: Number(defaultOf('API_PORT')),
    });
  });

  it("several workers take reuseport on the UDP listen (one device flow, one worker); the fleet's one worker does not need it", () => {
    const deploy = read('deploy/nginx/fleet.conf');
    expect(deploy).toMatch(/^worker_processes auto;$/m);
    expect(deploy).toMatch(/listen 0\.0\.0\.0:5684 udp reuseport;/);
    const local = nginxConfig('/tmp/x', [{ listen: 15684, protocol: 'udp', upstreams: ['127.0.0.1:1'] }]);
    expect(local).toMatch(/^worker_processes 1;$/m);
    expect(local).toMatch(/listen 127\.0\.0\.1:15684 udp;/);
    // no resolver without `resolve`: it would do nothing (follow.sh reloads nginx instead)
    expect(deploy).not.toMatch(/^\s*resolver /m);
  });

  it.skipIf(!haveNginx || !STREAM_MODULE)("is valid for Debian's nginx (nginx -t), as is the fleet's own rendering", () => {
    // the service names resolve in the compose network only: the same file with loopback in their place
    const names = [...role('gateway'), ...role('api')];
    let deploy = read('deploy/nginx/fleet.conf');
    for (const n of names) deploy = deploy.replaceAll(`${n}:`, '127.0.0.1:');
    const checked = nginxTest(`load_module ${STREAM_MODULE};\n${deploy}`);
    expect(checked.output).toContain('test is successful');
    expect(checked.ok).toBe(true);
    const dir = mkdtempSync(path.join(tmp, 'fleet-'));
    const local = nginxTest(
      nginxConfig(dir, [
        { listen: 15684, protocol: 'udp', upstreams: ['127.0.0.1:20001', '127.0.0.1:20002'], balance: 'source' },
        { listen: 18443, protocol: 'tcp', upstreams: ['127.0.0.1:20003'] },
      ]),
    );
    expect(local.ok, local.output).toBe(true);
  });

  it('deploy/nginx/follow.sh, which runs nginx in the container and reloads it when an upstream address changes, is valid sh', () => {
    expect(spawnSync('sh', ['-n', path.join(ROOT, 'deploy/nginx/follow.sh')]).status).toBe(0);
    const balancer = services.balancer!;
    expect(balancer.volumes).toEqual(
      expect.arrayContaining(['./deploy/nginx/fleet.conf:/etc/nginx/nginx.conf:ro', './deploy/nginx/follow.sh:/etc/nginx/follow.sh:ro']),
    );
    expect(balancer.entrypoint?.slice(0, 2)).toEqual(['/bin/sh', '/etc/nginx/follow.sh']);
    expect(balancer.entrypoint?.slice(2).sort()).toEqual([...role('gateway'), ...role('api')].sort());
    // nginx refuses to start on a name that does not resolve: it waits for every upstream container
    for (const n of [...role('gateway'), ...role('api')])
      expect((balancer.depends_on as Record<string, { condition: string }>)[n]).toEqual({ condition: 'service_healthy' });
  });

  it("follow.sh reloads nginx when an upstream name's address changes, never while a name does not resolve, and stops nginx on SIGTERM", async () => {
    // nginx and getent replaced by scripts that log what they are asked; the names resolve from a file the test edits
    const dir = mkdtempSync(path.join(tmp, 'follow-'));
    const bin = path.join(dir, 'bin');
    mkdirSync(bin);
    const log = path.join(dir, 'log');
    const hosts = path.join(dir, 'hosts');
    // node, not sh, in nginx's place: sh runs a background job with SIGQUIT ignored and cannot trap it; nginx (and
    // node) install their own handler
    const fake = `const fs = require('node:fs'); const a = process.argv.slice(2).join(' '); fs.appendFileSync(${JSON.stringify(log)}, 'nginx ' + a + '\\n');
if (a.includes('daemon off')) { process.on('SIGQUIT', () => { fs.appendFileSync(${JSON.stringify(log)}, 'nginx quit\\n'); process.exit(0); }); setInterval(() => {}, 1000); }`;
    writeFileSync(path.join(dir, 'nginx.cjs'), fake);
    writeFileSync(path.join(bin, 'nginx'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${path.join(dir, 'nginx.cjs')} "$@"\n`);
    writeFileSync(path.join(bin, 'getent'), `#!/bin/sh\necho "getent $2" >> ${log}\ngrep " $2$" ${hosts}\n`);
    for (const f of ['nginx', 'getent']) chmodSync(path.join(bin, f), 0o755);
    writeFileSync(hosts, '10.0.0.1 gateway-1\n10.0.0.9 api\n');
    writeFileSync(log, '');
    const follow = spawn('sh', [path.join(ROOT, 'deploy/nginx/follow.sh'), 'gateway-1', 'api'], {
      env: { PATH: `${bin}:${process.env.PATH}`, FOLLOW_INTERVAL: '0.1' },
      stdio: 'ignore',
    });
    const exited = new Promise<number | null>((resolve) => follow.once('exit', resolve));
    const lines = () => readFileSync(log, 'utf8').split('\n');
    const count = (line: string) => lines().filter((l) => l === line).length;
    try {
      await until(
        async () => count('getent api'),
        (n) => n >= 3,
        'follow.sh looks the names up',
        10_000,
      );
      expect(count('nginx -g daemon off;')).toBe(1);
      expect(count('nginx -s reload'), 'nothing changed').toBe(0);
      writeFileSync(hosts, '10.0.0.2 gateway-1\n10.0.0.9 api\n'); // gateway-1 recreated with another address
      await until(
        async () => count('nginx -s reload'),
        (n) => n === 1,
        'a reload after the address changed',
        10_000,
      );
      writeFileSync(hosts, '10.0.0.3 gateway-1\n'); // api is being recreated: it does not resolve
      const looked = count('getent api');
      await until(
        async () => count('getent api'),
        (n) => n >= looked + 3,
        'lookups while api does not resolve',
        10_000,
      );
      expect(count('nginx -s reload'), 'no reload while a name does not resolve').toBe(1);
      writeFileSync(hosts, '10.0.0.3 gateway-1\n10.0.0.8 api\n');
      await until(
        async () => count('nginx -s reload'),
        (n) => n === 2,
        'a reload once every name resolves again',
        10_000,
      );
    } finally {
      follow.kill('SIGTERM');
      setTimeout(() => follow.kill('SIGKILL'), 5000).unref();
    }
    expect(await exited).toBe(0);
    expect(count('nginx quit'), 'nginx stopped gracefully').toBe(1);
  });
});

describe('docker-compose.yml: the compose fleet', () => {
  it('has the roles npm run fleet starts: an API node, three gateways, two workers', () => {
    expect({ api: role('api').length, gateway: role('gateway').length, worker: role('worker').length }).toEqual({ api: 1, gateway: 3, worker: 2 });
  });

  it('sets only settings of docs/configuration.md (src/app/config.ts CONFIG_VARIABLES) on its gridgate containers', () => {
    const docs = read('docs/configuration.md');
    for (const [name, s] of Object.entries(services).filter(([, x]) => x.build !== undefined)) {
      for (const key of Object.keys(s.environment ?? {})) {
        expect(CONFIG_VARIABLES[key], `${name}: ${key}`).toBeDefined();
        expect(docs, `${name}: ${key} in docs/configuration.md`).toContain(key);
      }
    }
  });

  it('gives each gateway the per-address limits npm run fleet sets behind nginx, and each its own cluster address', () => {
    for (const g of role('gateway')) {
      const env = services[g]!.environment!;
      expect(Object.fromEntries(Object.keys(LIMITS_BEHIND_NGINX).map((k) => [k, String(env[k])])), g).toEqual(LIMITS_BEHIND_NGINX);
      expect(env.DTLS_CLUSTER_ADDRESS).toBe(g);
      expect(Number(env.DTLS_CLUSTER_PORT)).toBeGreaterThan(0);
    }
    for (const n of [...role('api'), ...role('worker')]) expect(services[n]!.environment).not.toHaveProperty('DTLS_MAX_SESSIONS_PER_ADDRESS');
  });

  it('every fleet node reaches the same stores, with one SECRET_KEY and queue', () => {
    const envs = nodes.map(([, s]) => s.environment!);
    for (const key of ['DATABASE_URL', 'REDIS_CLUSTER_NODES', 'SECRET_KEY', 'QUEUE_NAME']) expect(new Set(envs.map((e) => e[key])).size, key).toBe(1);
    const redis = String(envs[0]!.REDIS_CLUSTER_NODES).split(',');
    for (const r of redis) expect(services[r.split(':')[0]!], r).toBeDefined();
  });

  it("publishes the balancer's listen ports, as the one-process service does", () => {
    const conf = read('deploy/nginx/fleet.conf');
    const listens = [...conf.matchAll(/listen [\d.]+:(\d+)( udp)?/g)].map((m) => `${m[1]}:${m[1]}${m[2] ? '/udp' : ''}`);
    expect([...services.balancer!.ports!].sort()).toEqual(listens.sort());
    expect([...services.gridgate!.ports!].sort()).toEqual(listens.sort());
  });
});

describe('deploy/prometheus and deploy/grafana', () => {
  it('Prometheus scrapes every fleet node on its API port, with node and role labels that match the compose services', () => {
    const prom = parse(read('deploy/prometheus/prometheus.yml')) as {
      scrape_configs: { static_configs: { targets: string[]; labels: { node: string; role: string } }[] }[];
    };
    const targets = prom.scrape_configs.flatMap((c) => c.static_configs);
    expect(targets.map((t) => t.labels.node).sort()).toEqual(nodes.map(([name]) => name).sort());
    for (const t of targets) {
      expect(t.targets).toEqual([`${t.labels.node}:${defaultOf('API_PORT')}`]);
      expect(services[t.labels.node]!.command?.[0]).toBe(t.labels.role);
    }
    expect(services.prometheus!.volumes).toContain('./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro');
  });

  it('every Grafana file parses; the dashboards provider points where the compose file mounts deploy/grafana/dashboards', () => {
    const files = (dir: string): string[] =>
      readdirSync(path.join(ROOT, dir)).flatMap((f) => (statSync(path.join(ROOT, dir, f)).isDirectory() ? files(path.join(dir, f)) : [path.join(dir, f)]));
    const all = files('deploy/grafana');
    expect(all.length).toBeGreaterThan(0);
    for (const f of all) {
      if (f.endsWith('.json')) expect(() => JSON.parse(read(f)), f).not.toThrow();
      else expect(() => parse(read(f)), f).not.toThrow();
    }
    const dashboard = JSON.parse(read('deploy/grafana/dashboards/fleet.json')) as { panels: unknown[] };
    expect(dashboard.panels.length).toBeGreaterThan(0);
    // every panel reads the provisioned Prometheus data source, at the compose service and port Prometheus has
    const source = (parse(read('deploy/grafana/provisioning/datasources/prometheus.yml')) as { datasources: { uid: string; url: string }[] }).datasources[0]!;
    expect(source.url).toBe(`http://prometheus:${services.prometheus!.ports![0]!.split(':')[1]}`);
    for (const panel of dashboard.panels as { title: string; datasource?: { uid: string }; targets?: { expr: string }[] }[]) {
      expect(panel.datasource?.uid, panel.title).toBe(source.uid);
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
    }
    const provider = parse(read('deploy/grafana/provisioning/dashboards/gridgate.yml')) as { providers: { options: { path: string } }[] };
    expect(services.grafana!.volumes).toContain(`./deploy/grafana/dashboards:${provider.providers[0]!.options.path}:ro`);
  });

  it('every file under deploy/ is one this test reads', () => {
    const known = ['deploy/nginx/fleet.conf', 'deploy/nginx/follow.sh', 'deploy/prometheus/prometheus.yml'];
    const listed = execFileSync('git', ['ls-files', 'deploy'], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n');
    for (const f of listed) expect(known.includes(f) || f.startsWith('deploy/grafana/'), f).toBe(true);
  });
});
