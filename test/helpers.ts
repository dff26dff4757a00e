import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadConfig, type Config } from '../src/settings.ts';
import { createContext, closeContext } from '../src/context.ts';
import type { AppContext } from '../src/app/context.ts';
import { createLogger } from '../src/app/logger.ts';
import { createEnvironment, createMachineAccount, type EnvironmentType } from '../src/accounts/store.ts';
import { createHttpApp } from '../src/api/app.ts';
import { registerRoutes } from '../src/routes.ts';

export const TEST_SECRET = '11'.repeat(32);

/**
 * Test configuration: real PostgreSQL (global setup's database) and Redis, ports chosen by the OS. With
 * TEST_REDIS_CLUSTER_NODES (and TEST_QUEUE_SHARDS) the Redis is that Redis Cluster (test/fleet/redis-cluster.test.ts).
 */
export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/gridgate_test',
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'gridgate-')),
    SECRET_KEY: TEST_SECRET,
    API_PORT: '0',
    HTTPS_DEVICE_PORT: '0',
    COAPS_PORT: '0',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    QUEUE_NAME: `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    ...(process.env.TEST_REDIS_CLUSTER_NODES
      ? { REDIS_CLUSTER_NODES: process.env.TEST_REDIS_CLUSTER_NODES, QUEUE_SHARDS: process.env.TEST_QUEUE_SHARDS ?? '1' }
      : {}),
    ...overrides,
  });
}

export async function testContext(overrides: Record<string, string> = {}): Promise<AppContext> {
  const config = testConfig(overrides);
  return createContext(config, createLogger(config.logLevel));
}

export interface ApiClient {
  environmentHashId: string;
  token: string;
  request<T = unknown>(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: T }>;
}

export interface TestApi {
  ctx: AppContext;
  app: FastifyInstance;
  /** a new environment with an account holding `rights`, logged in */
  login(type: EnvironmentType, rights?: string[]): Promise<ApiClient>;
  close(): Promise<void>;
}

export async function startTestApi(ctx?: AppContext, ...extra: ((app: FastifyInstance, ctx: AppContext) => Promise<void>)[]): Promise<TestApi> {
  const context = ctx ?? (await testContext());
  const app = await createHttpApp(context);
  await registerRoutes(app, context);
  for (const register of extra) await register(app, context);
  await app.ready();
  return {
    ctx: context,
    app,
    async login(type, rights) {
      const env = await createEnvironment(context.db, type, `test ${type}`);
      const account = await createMachineAccount(
        context.db,
        env.hashId,
        rights ?? (type === 'connectivity' ? ['ENVIRONMENT_ADMIN'] : ['READ', 'STATIC', 'SENSORS', 'ENVIRONMENT_ADMIN']),
      );
      const res = await app.inject({
        method: 'POST',
        url: '/authentication/machine-login',
        headers: { 'api-version': '5' },
        payload: { assertion: account.assertion },
      });
      if (res.statusCode !== 200) throw new Error(`login failed: ${res.body}`);
      const token = (res.json() as { jwt: string }).jwt;
      return {
        environmentHashId: env.hashId,
        token,
        async request(method, url, body, headers) {
          const r = await app.inject({
            method: method as 'GET',
            url,
            headers: { 'api-version': '5', 'environment-hash-id': env.hashId, authorization: `Bearer ${token}`, ...headers },
            ...(body === undefined ? {} : { payload: body as object }),
          });
          return { status: r.statusCode, body: (r.body ? r.json() : null) as never };
        },
      };
    },
    async close() {
      await app.close();
      if (!ctx) await closeContext(context);
    },
  };
}
