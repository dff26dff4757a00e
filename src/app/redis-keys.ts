// Redis key names, and why they carry braces.
//
// On a Redis Cluster every key lives in one of 16384 hash slots, spread over the masters. A command, a
// MULTI/EXEC or a Lua script that touches several keys (and a pipeline, as ioredis sends it) must find them
// all in one slot, or the cluster answers CROSSSLOT. When a key holds `{...}`, only the text inside the first
// braces (its hash tag) picks the slot. So:
//
// - keys used alone (a cache entry, a lock, a rate bucket): any name; they spread over the masters by themselves;
// - keys a command combines: built with `tagged(tag, ...)`, the same tag for all of them. Pick the tag by what
//   is combined: a device's keys (the device's hashId), a shard of a deployment's keys (`shardTag`), a queue
//   (BullMQ's prefix, `bullQueue`). One tag is one slot is one master: a tag every request uses is a hot spot,
//   so shard it (`shardOf`) rather than putting a deployment's keys under one tag.
//
// A single Redis (no REDIS_CLUSTER_NODES) ignores the braces: the same names work on both.

import type { RedisConfig } from './redis.ts';

/** `{tag}:part:part`: keys with the same tag share a cluster hash slot, so one command, transaction or script may combine them. */
export function tagged(tag: string, ...parts: (string | number)[]): string {
  if (/[{}]/.test(tag)) throw new Error(`a hash tag cannot hold braces: ${tag}`);
  return parts.length === 0 ? `{${tag}}` : `{${tag}}:${parts.join(':')}`;
}

/** The shard (0 .. shards-1) an id belongs to: FNV-1a of its text, stable across processes and releases. */
export function shardOf(id: string, shards: number): number {
  if (shards <= 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

/** The hash tag of shard `shard` of one of a deployment's key families: `<QUEUE_NAME>:<family>:<shard>`. */
export const shardTag = (config: { queueName: string }, family: string, shard: number) => `${config.queueName}:${family}:${shard}`;

/**
 * Name and prefix of shard `shard` of the BullMQ queue `name`. BullMQ's scripts combine a queue's keys
 * (`<prefix>:<name>:wait`, `:active`, ...), so on a cluster the prefix is a hash tag: `{bull:<name>:<shard>}`.
 * On a single Redis, shard 0 keeps the names the service always had (`bull:<name>:...`), so jobs queued before
 * an upgrade are still taken; shard n > 0 is the queue `<name>-<n>`.
 */
export function bullQueue(config: RedisConfig, name: string, shard = 0): { name: string; prefix: string } {
  if (config.redisClusterNodes.length > 0) return { name, prefix: tagged(`bull:${name}:${shard}`) };
  return { name: shard === 0 ? name : `${name}-${shard}`, prefix: 'bull' };
}

/**
 * The pub/sub channel of one environment's live log: notices of its supplier activities as the worker stores them
 * (src/connectivity/live/). One channel per environment, so an API process hears only the environments it streams.
 */
export const liveActivityChannel = (config: { queueName: string }, environmentId: number) => `${config.queueName}:live-activity:${environmentId}`;

/** The leases of one environment's open live log streams, over every API process (a sorted set: stream id → lease end). */
export const liveStreamsKey = (config: { queueName: string }, environmentHashId: string) => `${config.queueName}:live-streams:${environmentHashId}`;
