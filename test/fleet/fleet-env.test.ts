// What `npm run fleet` hands its nodes and how it reads its command line, without starting anything.
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../../src/settings.ts';
import { FLEET_DEFAULT_PORTS, readFleetCommand } from '../../scripts/fleet/command.ts';
import { FLEET_OWNED, nodeEnv } from '../../scripts/fleet/env.ts';

describe('nodeEnv: what reaches a fleet node', () => {
  const operator = {
    QUEUE_SHARDS: '6',
    DTLS_MAX_SESSIONS_PER_ADDRESS: '5000',
    SHUTDOWN_GRACE_MS: '20000',
    API_HOST: '10.0.0.5',
    API_PORT: '8080',
    COAPS_PORT: '5684',
    COAP_PORT: '5683',
    ROLE: 'all',
    DATA_DIR: './data',
    PATH: '/usr/bin',
    AWS_SECRET_ACCESS_KEY: 'not ours',
    EMPTY_LOOKING: undefined,
  };

  it('passes the settings of docs/configuration.md the operator set: QUEUE_SHARDS, DTLS_MAX_SESSIONS_PER_ADDRESS, SHUTDOWN_GRACE_MS, API_HOST', () => {
    const env = nodeEnv(operator, {});
    expect(env).toMatchObject({ QUEUE_SHARDS: '6', DTLS_MAX_SESSIONS_PER_ADDRESS: '5000', SHUTDOWN_GRACE_MS: '20000', API_HOST: '10.0.0.5' });
  });

  it('passes nothing that is not a setting, and none the fleet decides per node', () => {
    const env = nodeEnv(operator, {});
    expect(Object.keys(env).sort()).toEqual(['API_HOST', 'DTLS_MAX_SESSIONS_PER_ADDRESS', 'QUEUE_SHARDS', 'SHUTDOWN_GRACE_MS']);
    for (const name of FLEET_OWNED) expect(CONFIG_VARIABLES[name], name).toBeDefined();
  });

  it("gives the per-node values over the operator's", () => {
    const env = nodeEnv(operator, { API_HOST: '127.0.0.1', SHUTDOWN_GRACE_MS: '5000', API_PORT: '20001', DATA_DIR: '/tmp/fleet/data' });
    expect(env).toMatchObject({ API_HOST: '127.0.0.1', SHUTDOWN_GRACE_MS: '5000', API_PORT: '20001', DATA_DIR: '/tmp/fleet/data', QUEUE_SHARDS: '6' });
  });

  it('passes every documented setting that is set, a new one included', () => {
    const all = Object.fromEntries(Object.keys(CONFIG_VARIABLES).map((name) => [name, 'x']));
    expect(Object.keys(nodeEnv(all, {})).sort()).toEqual(
      Object.keys(CONFIG_VARIABLES)
        .filter((n) => !FLEET_OWNED.has(n))
        .sort(),
    );
  });
});

describe('npm run fleet: the command line', () => {
  const read = (args: string[], env: Record<string, string> = {}) => readFleetCommand(args, env);

  it("starts a fleet by default, on ports beside npm start's and on 127.0.0.1", () => {
    const outcome = read([]);
    expect(outcome).toEqual({
      kind: 'ok',
      command: expect.objectContaining({ kind: 'start', host: '127.0.0.1', gateways: 3, workers: 2, ports: FLEET_DEFAULT_PORTS }),
    });
    const defaults = Object.values(FLEET_DEFAULT_PORTS);
    for (const port of [8080, 8443, 5684]) expect(defaults).not.toContain(port);
  });

  it("takes the ports, --host, and API_HOST as --host's default", () => {
    expect(read(['--api-port', '1', '--https-port', '2', '--coaps-port', '3', '--host', '0.0.0.0', '--gateways', '1', '--workers', '1'])).toEqual({
      kind: 'ok',
      command: expect.objectContaining({ host: '0.0.0.0', gateways: 1, workers: 1, ports: { api: 1, https: 2, coaps: 3 } }),
    });
    expect(read([], { API_HOST: '10.0.0.5' })).toEqual({ kind: 'ok', command: expect.objectContaining({ host: '10.0.0.5' }) });
    expect(read(['--host', '127.0.0.2'], { API_HOST: '10.0.0.5' })).toEqual({ kind: 'ok', command: expect.objectContaining({ host: '127.0.0.2' }) });
  });

  it('reads the commands for a running fleet', () => {
    expect(read(['status', '--dir', '/tmp/f'])).toEqual({
      kind: 'ok',
      command: { kind: 'control', dir: '/tmp/f', request: { command: 'status' }, json: false },
    });
    expect(read(['status', '--json'])).toEqual({
      kind: 'ok',
      command: { kind: 'control', dir: '/tmp/gridgate-fleet', request: { command: 'status' }, json: true },
    });
    expect(read(['roll'])).toEqual({ kind: 'ok', command: expect.objectContaining({ request: { command: 'roll' } }) });
    expect(read(['stop'])).toEqual({ kind: 'ok', command: expect.objectContaining({ request: { command: 'stop' } }) });
    expect(read(['restart', 'gateway-2'])).toEqual({
      kind: 'ok',
      command: expect.objectContaining({ request: { command: 'restart', node: 'gateway-2', signal: 'SIGTERM' } }),
    });
    expect(read(['kill', 'worker-1', '--signal', 'SIGKILL'])).toEqual({
      kind: 'ok',
      command: expect.objectContaining({ request: { command: 'kill', node: 'worker-1', signal: 'SIGKILL' } }),
    });
  });

  it('names a mistake in one line', () => {
    expect(read(['restart'])).toEqual({ kind: 'error', message: expect.stringMatching(/^restart needs a node/) });
    expect(read(['status', 'gateway-1'])).toEqual({ kind: 'error', message: 'unexpected argument "gateway-1"' });
    expect(read(['kill', 'gateway-1', 'gateway-2'])).toEqual({ kind: 'error', message: 'unexpected argument "gateway-2"' });
    expect(read(['reload'])).toEqual({ kind: 'error', message: expect.stringMatching(/^unknown command "reload"/) });
    expect(read(['--signal', 'SIGHUP', 'kill', 'api-1'])).toEqual({ kind: 'error', message: expect.stringMatching(/^--signal takes SIGTERM or SIGKILL/) });
    expect(read(['--api-port', 'eighty'])).toEqual({ kind: 'error', message: expect.stringMatching(/^--api-port takes a number/) });
    expect(read(['--help'])).toEqual({ kind: 'help' });
  });
});
