import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { typed } from '../../http/typed.ts';
import type { AppContext } from '../../app/context.ts';
import { ParameterError } from '../../app/errors.ts';
import { readRights } from '../graph-schemas.ts';
import { TileCache } from './cache.ts';

/** zoom levels a map asks for; past 24 a tile is under a centimetre wide */
const MAX_ZOOM = 24;

const TileParams = Type.Object({
  z: Type.Integer({ minimum: 0, maximum: MAX_ZOOM }),
  x: Type.Integer({ minimum: 0 }),
  y: Type.Integer({ minimum: 0 }),
});
const TileQuery = Type.Object({
  mapLayers: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { maxItems: 30 })),
});

/** The SDK's graph getTile: a Mapbox Vector Tile of the environment's pin groups, edges and nodes (src/monitoring/tiles/store.ts), from the process's cache of rendered tiles while the environment is unchanged (cache.ts). */
export async function tileRoutes(fastify: FastifyInstance, ctx: AppContext): Promise<void> {
  const app = typed(fastify);
  const cache = new TileCache();
  app.get(
    '/graph/tiles/:z/:x/:y',
    {
      config: { rights: readRights },
      schema: {
        tags: ['graph'],
        summary: 'getTile',
        params: TileParams,
        querystring: TileQuery,
        description:
          'A Mapbox Vector Tile (2.1, extent 4096, buffer 64): layer pinGroups (points: hashId, name, symbolKey, level, mapLayer, deviceLinkHashId; ' +
          'past 2000 in a tile, clusters: cluster, pointCount, level), layer edges (lines: hashId, name, level, mapLayer) and, with mapLayers naming nodes, ' +
          'layer nodes (points: hashId, name), of the map layers asked for (default: default).',
      },
    },
    async (request, reply) => {
      const { z, x, y } = request.params;
      if (x >= 2 ** z) throw new ParameterError(`x must be below ${2 ** z} at zoom ${z}`);
      if (y >= 2 ** z) throw new ParameterError(`y must be below ${2 ** z} at zoom ${z}`);
      const mapLayers = request.query.mapLayers ?? ['default'];
      const tile = await cache.tile(ctx.db, request.account.environment.id, { z, x, y }, mapLayers);
      reply.header('content-type', 'application/vnd.mapbox-vector-tile');
      return reply.send(tile);
    },
  );
}
