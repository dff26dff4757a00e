import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type ApiClient, type TestApi } from '../helpers.ts';
import { expectParameterError } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';
import { ok } from './linked-device.ts';

// graph update-pin-groups (POST /graph/pin-groups): many pin groups to one map layer at once, with
// includeEdges also the edges their pins lie on; all or nothing.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

const RIGHTS = ['READ', 'STATIC', 'ENVIRONMENT_ADMIN'];

/** A monitoring environment with the map layers base (the first) and aerial. */
async function twoLayers(rights = RIGHTS): Promise<ApiClient> {
  const c = await api.login('monitoring', [...new Set([...rights, 'ENVIRONMENT_ADMIN'])]);
  ok(
    await c.request('PUT', '/environment/', {
      mapLayers: [
        { name: 'Base', key: 'base' },
        { name: 'Aerial', key: 'aerial' },
      ],
    }),
  );
  return c;
}

const layerOf = async (c: ApiClient, pinGroupHashId: string) =>
  ok(await c.request<{ pinGroup: { mapLayer: string } }>('GET', `/graph/pin-group/${pinGroupHashId}`)).pinGroup.mapLayer;
const edgeLayerOf = async (c: ApiClient, edgeHashId: string) =>
  ok(await c.request<{ edge: { mapLayer: string } }>('GET', `/graph/edge/${edgeHashId}`)).edge.mapLayer;

/** An edge with one pin of `pinGroupHashId` on it. */
async function edgeThrough(c: ApiClient, pinGroupHashId: string): Promise<string> {
  const edge = ok(
    await c.request<{ hashId: string }>('POST', '/graph/edge', {
      geometry: {
        type: 'LineString',
        coordinates: [
          [5, 52],
          [5.1, 52.1],
        ],
      },
      fields: { id: 'line' },
    }),
  ).hashId;
  const pin = await addPin(c, pinGroupHashId, 'on the line');
  ok(await c.request('POST', `/graph/pin/${pin.hashId}`, { edgeHashId: edge }));
  return edge;
}

describe('pin groups update', () => {
  it('moves the named pin groups to the map layer and answers 204; others and their edges stay', async () => {
    const c = await twoLayers();
    const [a, b, stay] = [await addPinGroup(c, 'a'), await addPinGroup(c, 'b'), await addPinGroup(c, 'stay')];
    const edge = await edgeThrough(c, a.hashId);
    const r = await c.request('POST', '/graph/pin-groups', { hashIds: [a.hashId, b.hashId], mapLayer: { key: 'aerial' } });
    expect([r.status, r.body]).toEqual([204, null]);
    expect([await layerOf(c, a.hashId), await layerOf(c, b.hashId), await layerOf(c, stay.hashId)]).toEqual(['aerial', 'aerial', 'base']);
    expect(await edgeLayerOf(c, edge)).toBe('base');
  });

  it("with includeEdges moves the edges the pin groups' pins lie on too", async () => {
    const c = await twoLayers();
    const [a, other] = [await addPinGroup(c, 'a'), await addPinGroup(c, 'other')];
    const [edge, otherEdge] = [await edgeThrough(c, a.hashId), await edgeThrough(c, other.hashId)];
    expect((await c.request('POST', '/graph/pin-groups', { hashIds: [a.hashId], mapLayer: { key: 'aerial', includeEdges: true } })).status).toBe(204);
    expect([await layerOf(c, a.hashId), await edgeLayerOf(c, edge)]).toEqual(['aerial', 'aerial']);
    expect([await layerOf(c, other.hashId), await edgeLayerOf(c, otherEdge)]).toEqual(['base', 'base']);
  });

  it('without a map layer changes nothing', async () => {
    const c = await twoLayers();
    const a = await addPinGroup(c, 'a');
    expect((await c.request('POST', '/graph/pin-groups', { hashIds: [a.hashId] })).status).toBe(204);
    expect((await c.request('POST', '/graph/pin-groups', { hashIds: [], mapLayer: { key: 'aerial' } })).status).toBe(204);
    expect(await layerOf(c, a.hashId)).toBe('base');
  });

  it('refuses a key that is not a map layer of the environment, and the layer "nodes", naming mapLayer.key; nothing moves', async () => {
    const c = await twoLayers();
    const a = await addPinGroup(c, 'a');
    expectParameterError(await c.request('POST', '/graph/pin-groups', { hashIds: [a.hashId], mapLayer: { key: 'satellite' } }), 'mapLayer.key', 'satellite');
    expectParameterError(await c.request('POST', '/graph/pin-groups', { hashIds: [a.hashId], mapLayer: { key: 'nodes' } }), 'mapLayer.key');
    expect(await layerOf(c, a.hashId)).toBe('base');
  });

  it('refuses more than 10,000 hashIds and a missing hashIds, naming hashIds', async () => {
    const c = await twoLayers();
    expectParameterError(
      await c.request('POST', '/graph/pin-groups', { hashIds: Array.from({ length: 10_001 }, (_, i) => `pg${i}`), mapLayer: { key: 'aerial' } }),
      'hashIds',
      '10000',
    );
    expectParameterError(await c.request('POST', '/graph/pin-groups', { mapLayer: { key: 'aerial' } }), 'hashIds');
  });

  it("answers 404 for another environment's pin group and moves none of the list", async () => {
    const c = await twoLayers();
    const stranger = await twoLayers();
    const mine = await addPinGroup(c, 'mine');
    const theirs = await addPinGroup(stranger, 'theirs');
    const r = await c.request<{ key: string; message: string }>('POST', '/graph/pin-groups', {
      hashIds: [mine.hashId, theirs.hashId],
      mapLayer: { key: 'aerial' },
    });
    expect([r.status, r.body.key]).toEqual([404, 'not_found_error']);
    expect(r.body.message).toContain(theirs.hashId);
    expect([await layerOf(c, mine.hashId), await layerOf(stranger, theirs.hashId)]).toEqual(['base', 'base']);
  });

  it('needs STATIC, and is not available in a connectivity environment', async () => {
    const reader = await api.login('monitoring', ['READ', 'ENVIRONMENT_ADMIN']);
    const r = await reader.request<{ key: string }>('POST', '/graph/pin-groups', { hashIds: [] });
    expect([r.status, r.body.key]).toEqual([403, 'right_error']);
    const supplier = await api.login('connectivity');
    const s = await supplier.request<{ key: string }>('POST', '/graph/pin-groups', { hashIds: [] });
    expect([s.status, s.body.key]).toEqual([403, 'right_error']);
  });
});
