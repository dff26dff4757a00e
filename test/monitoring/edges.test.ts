import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';

// Edges (lines): geometry, fields, mapLayer, photo; pins on an edge.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Edge {
  hashId: string;
  name: string;
  fields: Record<string, unknown>;
  geometry: unknown;
  mapLayer: string;
  node1HashId: string | null;
  node2HashId: string | null;
  level: number;
  mostRecentMeasurementAt: null;
  deletedAt: null;
}
interface Node {
  hashId: string;
  geometry: unknown;
  name: string;
  fields: Record<string, unknown>;
  gridHashId: string;
  deletedAt: null;
}
const line = {
  type: 'LineString',
  coordinates: [
    [4.88, 52.37],
    [4.89, 52.36],
  ],
};

describe('edges', () => {
  it('add / get / find / update / delete; pins on an edge show in pin, pin group and edge answers; graph find and locations update take edges', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const add = await c.request<{ hashId: string; edge: Edge }>('POST', '/graph/edge', {
      geometry: line,
      fields: { id: 'Main pipe' },
      nodeHashIds: [null, null],
      properties: { legacy: true },
      photo: 'data:image/png;base64,AA',
    });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    expect(add.body.edge).toEqual({
      hashId: add.body.hashId,
      node1HashId: expect.any(String),
      node2HashId: expect.any(String),
      geometry: line,
      name: 'Main pipe',
      fields: { id: 'Main pipe' },
      level: 0,
      mapLayer: 'default',
      mostRecentMeasurementAt: null,
      deletedAt: null,
    });
    const multi = {
      type: 'MultiLineString',
      coordinates: [
        [
          [1, 1],
          [2, 2],
        ],
        [
          [3, 3],
          [4, 4],
        ],
      ],
    };
    expect((await c.request('POST', '/graph/edge', { geometry: multi, fields: { id: 'Branches' } })).status).toBe(200);

    const pg = await addPinGroup(c);
    const pin = await c.request<{ pin: { hashId: string; edgeHashId: string | null } }>('POST', `/graph/pin-group/${pg.hashId}/pin`, {
      fields: { id: 'on pipe' },
      edgeHashId: add.body.hashId,
    });
    expect(pin.body.pin.edgeHashId).toBe(add.body.hashId);
    const get = await c.request<{
      edge: Edge;
      pins: { hashId: string }[];
      pinGroups: { hashId: string }[];
      measurementCycles: unknown[];
      nextReportBefore: unknown[];
      thresholds: unknown[];
      photo: string;
    }>('GET', `/graph/edge/${add.body.hashId}`);
    expect(get.body).toMatchObject({
      pins: [{ hashId: pin.body.pin.hashId }],
      pinGroups: [{ hashId: pg.hashId }],
      nextReportBefore: [null],
      thresholds: [],
      photo: 'data:image/png;base64,AA',
    });
    expect((await c.request<{ edges: Edge[] }>('GET', `/graph/pin/${pin.body.pin.hashId}`)).body.edges.map((e) => e.hashId)).toEqual([add.body.hashId]);
    expect((await c.request<{ edges: Edge[] }>('GET', `/graph/pin-group/${pg.hashId}`)).body.edges.map((e) => e.hashId)).toEqual([add.body.hashId]);
    expect((await findAll<{ pinGroup: { hashId: string } }>(c, `/graph/pin-group?forEdge=${add.body.hashId}`)).map((r) => r.pinGroup.hashId)).toEqual([
      pg.hashId,
    ]);

    const upd = await c.request<{ edge: Edge }>('POST', `/graph/edge/${add.body.hashId}`, { fields: [{ key: 'id', value: 'Main pipe 2' }], photo: null });
    expect(upd.body.edge.name).toBe('Main pipe 2');
    const moved = {
      type: 'LineString',
      coordinates: [
        [5, 52],
        [5.1, 52.1],
        [5.2, 52],
      ],
    };
    expect((await c.request('POST', '/graph/', [{ type: 'edge', hashId: add.body.hashId, geometry: moved }])).status).toBe(204);
    expect((await c.request<{ edge: Edge }>('GET', `/graph/edge/${add.body.hashId}`)).body.edge.geometry).toEqual(moved);
    const found = await findAll<{ objectType: string; name: string }>(c, '/graph/?search=main');
    expect(found).toEqual([{ objectType: 'edge', hashId: add.body.hashId, name: 'Main pipe 2' }]);
    expect((await findAll<{ edge: Edge }>(c, '/graph/edge?sortBy=name&descending=false')).map((r) => r.edge.name)).toEqual(['Branches', 'Main pipe 2']);

    expect((await c.request('DELETE', `/graph/edge/${add.body.hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/graph/edge/${add.body.hashId}`)).status).toBe(404);
    expect((await c.request<{ pin: { edgeHashId: null } }>('GET', `/graph/pin/${pin.body.pin.hashId}`)).body.pin.edgeHashId).toBeNull();
  });

  it('limits and references are parameter_errors naming the field; another environment reaches nothing', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const add = (body: Record<string, unknown>) => c.request<ErrorBody>('POST', '/graph/edge', { geometry: line, fields: { id: 'x' }, ...body });
    expectParameterError(await add({ geometry: { type: 'LineString', coordinates: [[1, 1]] } }), 'geometry');
    expectParameterError(await add({ geometry: { type: 'Point', coordinates: [1, 1] } }), 'geometry');
    expectParameterError(await add({ fields: { id: 'x', colour: 'red' } }), 'fields.colour');
    expectParameterError(await add({ mapLayer: 'elsewhere' }), 'mapLayer');
    expectParameterError(await add({ nodeHashIds: [null, null, null] }), 'nodeHashIds');
    const mine = (await c.request<{ hashId: string }>('POST', '/graph/edge', { geometry: line, fields: { id: 'mine' } })).body.hashId;
    const pg = await addPinGroup(other);
    expectParameterError(await other.request('POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'p' }, edgeHashId: mine }), 'edgeHashId');
    const pin = await addPin(other, pg.hashId, 'p');
    expectParameterError(await other.request('POST', `/graph/pin/${pin.hashId}`, { edgeHashId: mine }), 'edgeHashId');
    for (const [m, u, b] of [
      ['GET', `/graph/edge/${mine}`],
      ['POST', `/graph/edge/${mine}`, { fields: { id: 'y' } }],
      ['DELETE', `/graph/edge/${mine}`],
    ] as [string, string, unknown?][]) {
      expect((await other.request(m, u, b)).status, `${m} ${u}`).toBe(404);
    }
    expect((await other.request('POST', '/graph/', [{ type: 'edge', hashId: mine, geometry: line }])).status).toBe(404);
    expect(await findAll(other, '/graph/edge')).toEqual([]);
  });

  it('an edge holds at most 10000 points, all its lines together, on add and update; a coordinate is a finite number in range', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    // lines of `n` points along a parallel, a few metres apart
    const lineOf = (n: number, lat = 52) => Array.from({ length: n }, (_, i) => [4 + i * 1e-4, lat]);
    const multi = (parts: number, n: number) => ({ type: 'MultiLineString', coordinates: Array.from({ length: parts }, (_, j) => lineOf(n, 52 + j * 0.01)) });
    const full = await c.request<{ hashId: string; edge: Edge }>('POST', '/graph/edge', { geometry: multi(2, 5000), fields: { id: 'long pipe' } });
    expect(full.status, JSON.stringify(full.body)).toBe(200);
    expect((await c.request('POST', '/graph/edge', { geometry: { type: 'LineString', coordinates: lineOf(10_000) }, fields: { id: 'one line' } })).status).toBe(
      200,
    );
    // five lines of 2001 points: each within a line's limit, 10005 together
    expectParameterError(await c.request('POST', '/graph/edge', { geometry: multi(5, 2001), fields: { id: 'x' } }), 'geometry.coordinates', '10000', '10005');
    expectParameterError(
      await c.request('POST', '/graph/edge', { geometry: { type: 'LineString', coordinates: lineOf(10_001) }, fields: { id: 'x' } }),
      'geometry',
    );
    expectParameterError(await c.request('POST', `/graph/edge/${full.body.hashId}`, { geometry: multi(3, 4000) }), 'geometry.coordinates', '10000', '12000');
    // the locations update keeps the same limit
    expectParameterError(
      await c.request('POST', '/graph/', [{ type: 'edge', hashId: full.body.hashId, geometry: multi(3, 4000) }]),
      '0.geometry.coordinates',
      '10000',
      '12000',
    );
    expect((await c.request<{ edge: Edge }>('GET', `/graph/edge/${full.body.hashId}`)).body.edge.geometry).toEqual(multi(2, 5000));
    // JSON's 1e999 is Infinity once parsed; NaN cannot be written in JSON at all
    for (const coordinates of ['[[1e999, 52], [4, 52]]', '[[4, 91], [4, 52]]', '[[-181, 52], [4, 52]]']) {
      const r = await api.app.inject({
        method: 'POST',
        url: '/graph/edge',
        headers: { 'api-version': '5', 'environment-hash-id': c.environmentHashId, authorization: `Bearer ${c.token}`, 'content-type': 'application/json' },
        payload: `{"geometry": {"type": "LineString", "coordinates": ${coordinates}}, "fields": {"id": "x"}}`,
      });
      expectParameterError({ status: r.statusCode, body: r.json() }, 'geometry');
    }
  });
});

describe('nodes', () => {
  it("add / get / find / update / delete; edges end at nodes, new end nodes join the other end's network; locations update takes nodes", async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const add = await c.request<{ hashId: string; node: Node }>('POST', '/graph/node', {
      geometry: { type: 'Point', coordinates: [4.88, 52.37] },
      fields: { id: 'Junction' },
    });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    expect(add.body.node).toMatchObject({ hashId: add.body.hashId, name: 'Junction', fields: { id: 'Junction' }, deletedAt: null });
    const edge = await c.request<{ hashId: string; edge: Edge }>('POST', '/graph/edge', {
      geometry: line,
      fields: { id: 'Spur' },
      nodeHashIds: [add.body.hashId, null],
    });
    expect(edge.status, JSON.stringify(edge.body)).toBe(200);
    expect(edge.body.edge.node1HashId).toBe(add.body.hashId);
    const far = await c.request<{ node: Node; edges: Edge[] }>('GET', `/graph/node/${edge.body.edge.node2HashId}`);
    expect(far.body.node.geometry).toEqual({ type: 'Point', coordinates: [4.89, 52.36] });
    expect(far.body.node.gridHashId).toBe(add.body.node.gridHashId);
    expect(far.body.edges.map((e) => e.hashId)).toEqual([edge.body.hashId]);
    const upd = await c.request<{ node: Node }>('POST', `/graph/node/${add.body.hashId}`, { fields: { id: 'Junction 2' } });
    expect(upd.body.node.name).toBe('Junction 2');
    expect((await c.request('POST', '/graph/', [{ type: 'node', hashId: add.body.hashId, geometry: { type: 'Point', coordinates: [1, 2] } }])).status).toBe(
      204,
    );
    expect((await c.request<{ node: Node }>('GET', `/graph/node/${add.body.hashId}`)).body.node.geometry).toEqual({ type: 'Point', coordinates: [1, 2] });
    expect((await findAll<{ node: Node }>(c, '/graph/node')).length).toBe(2);
    expect((await findAll<{ grid: { typeKey: string } }>(c, '/graph/grid?type=node')).length).toBe(1);
    expect((await c.request('DELETE', `/graph/node/${add.body.hashId}`)).status).toBe(204);
    expect((await c.request<{ edge: Edge }>('GET', `/graph/edge/${edge.body.hashId}`)).body.edge.node1HashId).toBeNull();
    expectParameterError(await c.request('POST', '/graph/node', { geometry: { type: 'Point', coordinates: [1, 200] }, fields: { id: 'x' } }), 'geometry');
    expectParameterError(
      await c.request('POST', '/graph/edge', {
        geometry: {
          type: 'MultiLineString',
          coordinates: [
            [
              [1, 1],
              [2, 2],
            ],
          ],
        },
        fields: { id: 'x' },
        nodeHashIds: [null],
      }),
      'nodeHashIds',
    );
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const node2 = edge.body.edge.node2HashId!;
    expect((await other.request('GET', `/graph/node/${node2}`)).status).toBe(404);
    expect((await other.request('POST', '/graph/edge', { geometry: line, fields: { id: 'x' }, nodeHashIds: [node2] })).status).toBe(404);
    expect((await other.request('DELETE', `/graph/node/${node2}`)).status).toBe(404);
    expect(await findAll(other, '/graph/node')).toEqual([]);
  });
  it("an edge between nodes of two networks merges them into the first end's network; one given node is both ends; concurrent joins lose no node", async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const node = async (name: string) =>
      (await c.request<{ hashId: string; node: Node }>('POST', '/graph/node', { geometry: { type: 'Point', coordinates: [4.8, 52.3] }, fields: { id: name } }))
        .body;
    const gridOf = async (hashId: string) => (await c.request<{ node: Node }>('GET', `/graph/node/${hashId}`)).body.node.gridHashId;
    const edge = async (nodeHashIds: (string | null)[]) => {
      const r = await c.request<{ hashId: string; edge: Edge }>('POST', '/graph/edge', { geometry: line, fields: { id: 'e' }, nodeHashIds });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return r.body.edge;
    };
    const a = await node('a');
    const b = await node('b');
    expect(a.node.gridHashId).not.toBe(b.node.gridHashId);
    // b's network has two nodes: b and the node made at the edge's far end
    const spur = await edge([b.hashId, null]);
    expect(await gridOf(spur.node2HashId!)).toBe(b.node.gridHashId);
    expect((await findAll(c, '/graph/grid?type=node')).length).toBe(2);
    await edge([a.hashId, b.hashId]);
    for (const n of [a.hashId, b.hashId, spur.node2HashId!]) expect(await gridOf(n)).toBe(a.node.gridHashId);
    const grids = await findAll<{ grid: { hashId: string } }>(c, '/graph/grid?type=node');
    expect(grids.map((g) => g.grid.hashId)).toEqual([a.node.gridHashId]);
    expect((await c.request('GET', `/graph/grid/${b.node.gridHashId}`)).status).toBe(404);
    // within one network nothing moves
    await edge([spur.node2HashId!, a.hashId]);
    expect(await gridOf(a.hashId)).toBe(a.node.gridHashId);
    // one node: both ends
    const loop = await edge([a.hashId]);
    expect([loop.node1HashId, loop.node2HashId]).toEqual([a.hashId, a.hashId]);
    // joins racing over shared networks: all end in one, every node kept
    const singles = await Promise.all(['p', 'q', 'r', 's', 't'].map(node));
    await Promise.all(
      [
        [0, 1],
        [1, 2],
        [2, 3],
        [3, 4],
        [4, 0],
      ].map(([x, y]) => edge([singles[x].hashId, singles[y].hashId])),
    );
    const after = await Promise.all(singles.map((n) => gridOf(n.hashId)));
    expect(new Set(after).size).toBe(1);
    expect((await findAll(c, '/graph/node')).length).toBe(3 + 5);
    expect((await findAll(c, '/graph/grid?type=node')).length).toBe(2);
    // another environment cannot join its network to these nodes
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const mine = (
      await other.request<{ hashId: string }>('POST', '/graph/node', { geometry: { type: 'Point', coordinates: [4.8, 52.3] }, fields: { id: 'x' } })
    ).body.hashId;
    expect((await other.request('POST', '/graph/edge', { geometry: line, fields: { id: 'x' }, nodeHashIds: [mine, a.hashId] })).status).toBe(404);
    expect(await gridOf(a.hashId)).toBe(a.node.gridHashId);
  });
  it('edge update: nodeHashIds re-ends a LineString edge and merges the networks; a MultiLineString edge turned LineString gets two nodes, the reverse none', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const node = async (name: string) =>
      (await c.request<{ hashId: string; node: Node }>('POST', '/graph/node', { geometry: { type: 'Point', coordinates: [4.8, 52.3] }, fields: { id: name } }))
        .body;
    const gridOf = async (hashId: string) => (await c.request<{ node: Node }>('GET', `/graph/node/${hashId}`)).body.node.gridHashId;
    const [a, b] = [await node('a'), await node('b')];
    const multi = {
      type: 'MultiLineString',
      coordinates: [
        [
          [4.8, 52.3],
          [4.81, 52.31],
        ],
        [
          [4.82, 52.32],
          [4.83, 52.33],
        ],
      ],
    };
    const added = await c.request<{ hashId: string; edge: Edge }>('POST', '/graph/edge', { geometry: multi, fields: { id: 'm' } });
    expect(added.body.edge).toMatchObject({ node1HashId: null, node2HashId: null });
    expectParameterError(await c.request('POST', `/graph/edge/${added.body.hashId}`, { nodeHashIds: [a.hashId, b.hashId] }), 'nodeHashIds');
    // turned LineString: two new nodes at its ends, one network
    const turned = await c.request<{ edge: Edge }>('POST', `/graph/edge/${added.body.hashId}`, { geometry: line });
    expect(turned.status, JSON.stringify(turned.body)).toBe(200);
    const { node1HashId, node2HashId } = turned.body.edge;
    expect(node1HashId).not.toBeNull();
    expect((await c.request<{ node: Node }>('GET', `/graph/node/${node2HashId}`)).body.node.geometry).toEqual({ type: 'Point', coordinates: [4.89, 52.36] });
    expect(await gridOf(node1HashId!)).toBe(await gridOf(node2HashId!));
    // re-ended at a and b: their networks merge into a's
    const reEnded = await c.request<{ edge: Edge }>('POST', `/graph/edge/${added.body.hashId}`, { nodeHashIds: [a.hashId, b.hashId] });
    expect(reEnded.body.edge).toMatchObject({ node1HashId: a.hashId, node2HashId: b.hashId });
    expect(await gridOf(b.hashId)).toBe(a.node.gridHashId);
    expect((await c.request('GET', `/graph/grid/${b.node.gridHashId}`)).status).toBe(404);
    expectParameterError(await c.request('POST', `/graph/edge/${added.body.hashId}`, { nodeHashIds: [a.hashId] }), 'nodeHashIds');
    // back to MultiLineString: no ends
    expect((await c.request<{ edge: Edge }>('POST', `/graph/edge/${added.body.hashId}`, { geometry: multi })).body.edge).toMatchObject({
      node1HashId: null,
      node2HashId: null,
    });
    // another environment's node is not found, and nothing changes
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const foreign = (
      await other.request<{ hashId: string }>('POST', '/graph/node', { geometry: { type: 'Point', coordinates: [4.8, 52.3] }, fields: { id: 'x' } })
    ).body.hashId;
    expect((await c.request('POST', `/graph/edge/${added.body.hashId}`, { geometry: line, nodeHashIds: [a.hashId, foreign] })).status).toBe(404);
    expect((await c.request<{ edge: Edge }>('GET', `/graph/edge/${added.body.hashId}`)).body.edge.geometry).toEqual(multi);
  });
});
