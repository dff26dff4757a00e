import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/settings.ts';
import { bullQueue, shardOf, tagged } from '../../src/app/redis-keys.ts';

const single = { redisUrl: 'redis://127.0.0.1:6379', redisClusterNodes: [] };
const cluster = { redisUrl: 'redis://127.0.0.1:6379', redisClusterNodes: [{ host: '10.0.0.1', port: 7001 }] };

describe('Redis key names', () => {
  it('tagged() puts the tag in braces (the part a Redis Cluster hashes) and refuses a tag that holds braces', () => {
    expect(tagged('q:counters:3', 'dev', '2026-11-28T01')).toBe('{q:counters:3}:dev:2026-11-28T01');
    expect(tagged('bull:q:0')).toBe('{bull:q:0}');
    expect(() => tagged('a}b', 'x')).toThrow(/braces/);
  });

  it('shardOf() keeps an id on one shard and spreads ids over all of them', () => {
    const ids = Array.from({ length: 600 }, (_, i) => `device${i}`);
    expect(ids.map((id) => shardOf(id, 6))).toEqual(ids.map((id) => shardOf(id, 6)));
    const perShard = new Map<number, number>();
    for (const id of ids) perShard.set(shardOf(id, 6), (perShard.get(shardOf(id, 6)) ?? 0) + 1);
    expect([...perShard.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    for (const n of perShard.values()) expect(n).toBeGreaterThan(50);
    expect(shardOf('anything', 1)).toBe(0);
  });

  it('bullQueue() keeps the names of before on a single Redis and gives each shard a hash tag on a cluster', () => {
    expect(bullQueue(single, 'device-events', 0)).toEqual({ name: 'device-events', prefix: 'bull' });
    expect(bullQueue(single, 'device-events', 2)).toEqual({ name: 'device-events-2', prefix: 'bull' });
    expect(bullQueue(cluster, 'device-events', 2)).toEqual({ name: 'device-events', prefix: '{bull:device-events:2}' });
  });

  it('REDIS_CLUSTER_NODES and QUEUE_SHARDS are read and validated', () => {
    const c = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7001, redis-2:7002,[::1]:7003', QUEUE_SHARDS: '6' });
    expect(c.redisClusterNodes).toEqual([
      { host: '10.0.0.1', port: 7001 },
      { host: 'redis-2', port: 7002 },
      { host: '::1', port: 7003 },
    ]);
    expect(c.queueShards).toBe(6);
    expect(loadConfig({}).redisClusterNodes).toEqual([]);
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'redis-1' })).toThrow(/REDIS_CLUSTER_NODES must be host:port/);
    expect(() => loadConfig({ QUEUE_SHARDS: '0' })).toThrow(/QUEUE_SHARDS must be an integer between 1/);
  });
});
