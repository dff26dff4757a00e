import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from './logger.ts';

export { Redis };

/** A Redis connection as BullMQ wants it (no per-command retry limit). */
export function createRedis(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, lazyConnect: false });
}

async function answers(url: string): Promise<boolean> {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/**
 * Makes sure a Redis answers at `url`. When none does, the URL names this machine and a
 * `redis-server` binary exists, a private one is spawned (append-only, data in `dataDir/redis`).
 */
export async function ensureRedis(url: string, dataDir: string, log: Logger): Promise<{ stop(): void }> {
  if (await answers(url)) return { stop: () => undefined };
  const u = new URL(url);
  const local = ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(u.hostname);
  const hasBinary = spawnSync('redis-server', ['--version']).status === 0;
  if (!local || !hasBinary) {
    throw new Error(`No Redis answers at ${url}. Start one (e.g. "apt-get install redis-server && redis-server --daemonize yes") or set REDIS_URL to a Redis that runs.`);
  }
  const dir = path.join(dataDir, 'redis');
  mkdirSync(dir, { recursive: true });
  const child = spawn('redis-server', ['--port', u.port || '6379', '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', ''], { stdio: 'ignore' });
  for (let i = 0; i < 50; i++) {
    if (await answers(url)) {
      log.info({ url, dir }, 'started a private redis-server');
      return { stop: () => child.kill('SIGTERM') };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`Started redis-server for ${url} but it did not answer within 5 s.`);
}
