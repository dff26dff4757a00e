import { parseArgs } from 'node:util';
import { loadConfig } from './app/config.ts';
import { createContext, closeContext } from './app/bootstrap.ts';
import { openDb } from './app/db.ts';
import { createLogger } from './app/logger.ts';
import { ensureRedis } from './app/redis.ts';
import { createEnvironment, createMachineAccount, revokeMachineAccount, type EnvironmentType } from './accounts/store.ts';
import { startService } from './service.ts';
import { retryFailedJobs } from './pipeline/failed-jobs.ts';

const ADMIN_USAGE = `usage: admin <command> [--flags]
  create-environment --type monitoring|connectivity --name <name>     → {"hashId","type","name"}
  create-machine-account --environment <hashId> --rights A,B [--name n] [--email address] → {"hashId","assertion"} (shown once)
  revoke-machine-account --account <hashId>                            → {"hashId","revoked"}
  retry-failed                                                          → {"queue","retried"}: device jobs failed for good run again`;

/** Operator commands: each prints one JSON object on stdout. */
async function admin(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({ args: rest, options: { type: { type: 'string' }, name: { type: 'string' }, environment: { type: 'string' }, rights: { type: 'string' }, account: { type: 'string' }, email: { type: 'string' } } });
  const config = loadConfig();
  const log = createLogger('silent');
  if (command === 'retry-failed') {
    process.stdout.write(`${JSON.stringify({ queue: config.queueName, retried: await retryFailedJobs(config, log) })}\n`);
    return;
  }
  const db = await openDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log, idleTimeoutMillis: config.databaseIdleTimeoutMs });
  try {
    let out: unknown;
    if (command === 'create-environment') {
      const env = await createEnvironment(db, values.type as EnvironmentType, values.name ?? '');
      out = { hashId: env.hashId, type: env.type, name: env.name };
    } else if (command === 'create-machine-account') {
      out = await createMachineAccount(db, values.environment ?? '', (values.rights ?? '').split(',').filter(Boolean), values.name, values.email);
    } else if (command === 'revoke-machine-account') {
      out = { hashId: values.account, revoked: await revokeMachineAccount(db, values.account ?? '') };
    } else {
      process.stderr.write(`${ADMIN_USAGE}\n`);
      process.exitCode = 2;
      return;
    }
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } finally {
    await db.close();
  }
}

async function serve(roleArg: string | undefined): Promise<void> {
  const config = loadConfig(process.env, roleArg);
  const log = createLogger(config.logLevel);
  // a Redis Cluster is the operator's to run; the single Redis of the embedded default may be spawned here
  const redis = config.redisClusterNodes.length > 0 ? { stop: () => undefined } : await ensureRedis(config.redisUrl, config.dataDir, log);
  const ctx = await createContext(config, log);
  const service = await startService(ctx, config.roles);
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    await service.stop();
    await closeContext(ctx);
    redis.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

const [first, ...rest] = process.argv.slice(2);
const run = first === 'admin' ? admin(rest) : serve(first);
run.catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
