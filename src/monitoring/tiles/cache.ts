// Rendered tiles of a process, per environment and the environment's tile version (migration 058). The version
// changes in the transaction of every write a tile shows and is read from PostgreSQL before each tile, so a cached
// tile is never older than the last write answered, on any node of a fleet; this memory only saves the render.
// The version is read before the graph: a tile rendered under version v shows v's writes or later ones, never
// earlier ones. Bounded by bytes, least recently used first out; a new version drops the environment's older tiles.
// Renders take turns per environment (renders.ts): a tile asked for by many at once is rendered once, and an
// environment's many cold tiles queue behind two of their own, not in front of other environments' requests.

import { namedStatement, type Queryable, type TxQueryable } from '../../app/db.ts';
import type { TileAddress } from './geometry.ts';
import { RenderTurns, TILE_RENDER_LIMITS, type RenderLimits } from './renders.ts';
import { renderTile } from './store.ts';

/** what the rendered tiles of one process may hold; a zoomed-out tile of a dense city is 20-80 kB */
export const TILE_CACHE_BYTES = 64 * 1024 * 1024;

const TILE_VERSION = namedStatement('tile-version', 'SELECT version FROM tile_version WHERE environment_id = $1');

/** The environment's tile version: a new one after each write a tile shows ('initial' before the first). */
export async function tileVersion(db: Queryable, environmentId: number): Promise<string> {
  const { rows } = await db.query<{ version: string }>(TILE_VERSION, [environmentId]);
  return rows[0]?.version ?? 'initial';
}

export class TileCache {
  /** key → tile, in the order of use (a Map iterates in insertion order: the first is the least recently used) */
  private readonly tiles = new Map<string, { environmentId: number; tile: Buffer }>();
  /** per environment: the newest version seen and the keys of its cached tiles */
  private readonly environments = new Map<number, { version: string; keys: Set<string> }>();
  /** renders under way: concurrent requests for one cold tile wait for one render */
  private readonly rendering = new Map<string, Promise<Buffer>>();
  private bytes = 0;
  private readonly maxBytes: number;
  private readonly turns: RenderTurns;

  constructor(maxBytes = TILE_CACHE_BYTES, limits: RenderLimits = TILE_RENDER_LIMITS) {
    this.maxBytes = maxBytes;
    this.turns = new RenderTurns(limits);
  }

  /** The tile as renderTile draws it now: from memory when the environment has not changed since it was drawn. */
  async tile(db: TxQueryable, environmentId: number, address: TileAddress, mapLayers: string[]): Promise<Buffer> {
    const version = await tileVersion(db, environmentId);
    // the layers are a set: ?mapLayers=a&mapLayers=b draws what b, a does
    const key = JSON.stringify([environmentId, version, address.z, address.x, address.y, [...new Set(mapLayers)].sort()]);
    const hit = this.tiles.get(key);
    if (hit) {
      this.tiles.delete(key);
      this.tiles.set(key, hit);
      return hit.tile;
    }
    const pending = this.rendering.get(key);
    if (pending) return pending;
    const render = this.turns
      .run(environmentId, () => renderTile(db, environmentId, address, mapLayers))
      .then((tile) => {
        this.keep(environmentId, version, key, tile);
        return tile;
      })
      .finally(() => this.rendering.delete(key));
    this.rendering.set(key, render);
    return render;
  }

  /** bytes of tiles held */
  get size(): number {
    return this.bytes;
  }

  private keep(environmentId: number, version: string, key: string, tile: Buffer): void {
    if (tile.length > this.maxBytes) return;
    let environment = this.environments.get(environmentId);
    if (environment && environment.version !== version) {
      // versions are not ordered: the one rendered last replaces the others (a request under another version does
      // not find its key and renders; being wrong about which is newer costs a render, never a stale tile)
      for (const old of environment.keys) this.drop(old);
      environment = this.environments.get(environmentId);
    }
    if (!environment) {
      environment = { version, keys: new Set() };
      this.environments.set(environmentId, environment);
    }
    this.tiles.set(key, { environmentId, tile });
    environment.keys.add(key);
    this.bytes += tile.length;
    for (const [oldest] of this.tiles) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(oldest);
    }
  }

  private drop(key: string): void {
    const entry = this.tiles.get(key);
    if (!entry) return;
    this.tiles.delete(key);
    this.bytes -= entry.tile.length;
    const environment = this.environments.get(entry.environmentId);
    environment?.keys.delete(key);
    if (environment && environment.keys.size === 0) this.environments.delete(entry.environmentId);
  }
}
