import { parseArgs } from 'node:util';
import { loadConfig } from './settings.ts';
import { createContext, closeContext } from './context.ts';
import { openDb } from './app/db.ts';
import { createLogger } from './app/logger.ts';
import { ensureRedis } from './app/redis.ts';
import { createEnvironment, createMachineAccount, revokeMachineAccount, type EnvironmentType } from './accounts/store.ts';
import { startService } from './service.ts';
import { retryFailedJobs } from './pipeline/failed-jobs.ts';

const ADMIN_USAGE = `usage: npm run admin -- <command> [--flags]   (or: node src/main.ts admin <command> [--flags])
  create-environment --type monitoring|connectivity --name <name>     → {"hashId","type","name"}
  create-machine-account --environment <hashId> --rights A,B [--name n] [--email address] → {"hashId","assertion"} (shown once)
  revoke-machine-account --account <hashId>                            → {"hashId","revoked"}
  retry-failed                                                          → {"queue","retried"}: device jobs failed for good run again
With npm, the -- before the command is needed: without it npm takes the flags for itself.`;

/** The flags each admin command needs. */
const REQUIRED: Record<string, string[]> = {
  'create-environment': ['type', 'name'],
  'create-machine-account': ['environment', 'rights'],
  'revoke-machine-account': ['account'],
  'retry-failed': [],
};

/** A mistake in how the admin CLI was called: printed with the usage, exit code 2. */
class UsageError extends Error {}

function adminArgs(argv: string[]): { command: string; values: Record<string, string | undefined> } {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') throw new UsageError('');
  if (!(command in REQUIRED)) throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        type: { type: 'string' },
        name: { type: 'string' },
        environment: { type: 'string' },
        rights: { type: 'string' },
        account: { type: 'string' },
        email: { type: 'string' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const missing = REQUIRED[command].filter((flag) => !values[flag]);
  if (missing.length > 0) throw new UsageError(`${command} needs ${missing.map((f) => `--${f}`).join(' and ')}`);
  if (command === 'create-environment' && values.type !== 'monitoring' && values.type !== 'connectivity') {
    throw new UsageError(`--type must be monitoring or connectivity, not ${JSON.stringify(values.type)}`);
  }
  return { command, values };
}

/** Operator commands: each prints one JSON object on stdout. */
async function admin(argv: string[]): Promise<void> {
  let parsed: ReturnType<typeof adminArgs>;
  try {
    parsed = adminArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`${err.message ? `${err.message}\n\n` : ''}${ADMIN_USAGE}\n`);
    process.exitCode = err.message ? 2 : 0;
    return;
  }
  const { command, values } = parsed;
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
    } else {
      out = { hashId: values.account, revoked: await revokeMachineAccount(db, values.account ?? '') };
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
  // a start that fails (a port taken, a store refusing) stops what it had started: the embedded PostgreSQL, the Redis
  let ctx: Awaited<ReturnType<typeof createContext>> | null = null;
  let service: Awaited<ReturnType<typeof startService>>;
  try {
    ctx = await createContext(config, log);
    service = await startService(ctx, config.roles);
  } catch (err) {
    if (ctx) await closeContext(ctx).catch(() => undefined);
    redis.stop();
    throw err;
  }
  const started = ctx;
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    await service.stop();
    await closeContext(started);
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
