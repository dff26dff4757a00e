import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApi, type TestApi } from '../helpers.ts';
import { expectParameterError, findAll, type ErrorBody } from '../connectivity/fixtures.ts';
import { addPin, addPinGroup } from './fixtures.ts';

// Pin grids and pin group grids, graph find and locations update.

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api.close();
});

interface Grid {
  hashId: string;
  typeKey: string;
  name: string;
  fields: Record<string, unknown>;
  deletedAt: null;
}
const ids = (list: { hashId: string }[]) => list.map((x) => x.hashId);

describe('grids', () => {
  it('pin group grids: ordered members, memberships from pin group add/update (gridHashIds, gridName), get with lastReports, delete', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const [a, b, d] = [await addPinGroup(c, 'a'), await addPinGroup(c, 'b'), await addPinGroup(c, 'd')];
    const add = await c.request<{ hashId: string; grid: Grid }>('POST', '/graph/pin-group-grid', {
      fields: { id: 'Route north' },
      pinGroupHashIds: [b.hashId, a.hashId],
    });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    expect(add.body.grid).toEqual({ hashId: add.body.hashId, typeKey: 'pinGroup', name: 'Route north', fields: { id: 'Route north' }, deletedAt: null });
    // appended at the end by a pin group update; a grid named on add is made once and then reused
    const upd = await c.request<{ grids: Grid[] }>('POST', `/graph/pin-group/${d.hashId}`, { gridHashIds: [add.body.hashId], gridName: 'Route south' });
    expect(upd.body.grids.map((g) => g.name).sort()).toEqual(['Route north', 'Route south']);
    const e = await addPinGroup(c, 'e', { gridName: 'Route south' });
    const get = await c.request<{ grid: Grid; pinGroups: { hashId: string }[]; lastReports: unknown[]; notificationLevel: number; photo: null }>(
      'GET',
      `/graph/pin-group-grid/${add.body.hashId}`,
    );
    expect(ids(get.body.pinGroups)).toEqual([b.hashId, a.hashId, d.hashId]);
    expect(get.body).toMatchObject({ lastReports: [], notificationLevel: 0, photo: null });
    const grids = await findAll<{ grid: Grid; notificationLevel: number }>(c, '/graph/grid?type=pinGroup');
    expect(grids.map((g) => g.grid.name).sort()).toEqual(['Route north', 'Route south']);
    const south = grids.find((g) => g.grid.name === 'Route south')!.grid.hashId;
    expect(ids((await c.request<{ pinGroups: { hashId: string }[] }>('GET', `/graph/pin-group-grid/${south}`)).body.pinGroups)).toEqual([d.hashId, e.hashId]);
    expect((await findAll<{ pinGroup: { hashId: string } }>(c, `/graph/pin-group?forGrid=${south}`)).map((r) => r.pinGroup.hashId).sort()).toEqual(
      [d.hashId, e.hashId].sort(),
    );
    // update sets the order
    const reorder = await c.request<{ grid: Grid; pinGroups: { hashId: string }[]; lastReports: unknown[] }>(
      'POST',
      `/graph/pin-group-grid/${add.body.hashId}`,
      { fields: { id: 'Route N' }, pinGroupHashIds: [d.hashId, b.hashId] },
    );
    expect(reorder.body.grid.name).toBe('Route N');
    expect(ids(reorder.body.pinGroups)).toEqual([d.hashId, b.hashId]);
    expect((await c.request<{ grids: Grid[] }>('GET', `/graph/pin-group/${d.hashId}`)).body.grids.map((g) => g.name).sort()).toEqual([
      'Route N',
      'Route south',
    ]);
    expect((await c.request('DELETE', `/graph/grid/${add.body.hashId}`)).status).toBe(204);
    expect((await c.request('GET', `/graph/pin-group-grid/${add.body.hashId}`)).status).toBe(404);
    // the pin group outlives its grid
    expect((await c.request('GET', `/graph/pin-group/${d.hashId}`)).status).toBe(200);
  });

  it('pin grids: members set on add and update, pins join through pinGridsHashIds', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const pg = await addPinGroup(c);
    const [p1, p2, p3] = [await addPin(c, pg.hashId, 'p1'), await addPin(c, pg.hashId, 'p2'), await addPin(c, pg.hashId, 'p3')];
    const add = await c.request<{ hashId: string; grid: Grid }>('POST', '/graph/pin-grid', { fields: { id: 'Cable 1' }, pinHashIds: [p2.hashId] });
    expect(add.body.grid.typeKey).toBe('pin');
    const pin = await c.request<{ grids: Grid[] }>('POST', `/graph/pin-group/${pg.hashId}/pin`, { fields: { id: 'p4' }, pinGridsHashIds: [add.body.hashId] });
    expect(pin.body.grids.map((g) => g.hashId)).toEqual([add.body.hashId]);
    const upd = await c.request<{ grids: Grid[] }>('POST', `/graph/pin/${p1.hashId}`, { pinGridsHashIds: [add.body.hashId] });
    expect(upd.body.grids.map((g) => g.hashId)).toEqual([add.body.hashId]);
    const get = await c.request<{ grid: Grid; pins: { hashId: string; name: string }[]; photo: null }>('GET', `/graph/pin-grid/${add.body.hashId}`);
    expect(get.body.pins.map((p) => p.name)).toEqual(['p2', 'p4', 'p1']);
    const set = await c.request<{ grid: Grid; pins: { hashId: string }[] }>('POST', `/graph/pin-grid/${add.body.hashId}`, {
      pinHashIds: [p3.hashId, p1.hashId],
    });
    expect(ids(set.body.pins)).toEqual([p3.hashId, p1.hashId]);
    // leaving through pin update
    expect((await c.request<{ grids: Grid[] }>('POST', `/graph/pin/${p1.hashId}`, { pinGridsHashIds: [] })).body.grids).toEqual([]);
    const pgGet = await c.request<{ pins: { pin: { hashId: string }; grids: Grid[] }[] }>('GET', `/graph/pin-group/${pg.hashId}`);
    expect(pgGet.body.pins.find((p) => p.pin.hashId === p3.hashId)!.grids.map((g) => g.hashId)).toEqual([add.body.hashId]);
    // a pin grid is not a pin group grid
    expect((await c.request('GET', `/graph/pin-group-grid/${add.body.hashId}`)).status).toBe(404);
  });

  it('the generic grid add / get / update answer the pin group grid shapes, limits and tenants included', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const [a, b] = [await addPinGroup(c, 'a'), await addPinGroup(c, 'b')];
    const add = await c.request<{ hashId: string; grid: Grid }>('POST', '/graph/grid', { fields: { id: 'Route west' }, pinGroupHashIds: [b.hashId, a.hashId] });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    expect(add.body).toEqual({
      hashId: add.body.hashId,
      grid: { hashId: add.body.hashId, typeKey: 'pinGroup', name: 'Route west', fields: { id: 'Route west' }, deletedAt: null },
    });
    const get = await c.request<{
      grid: Grid;
      pinGroups: { hashId: string }[];
      lastReports: unknown[];
      notificationLevel: number | null;
      photo: string | null;
    }>('GET', `/graph/grid/${add.body.hashId}`);
    expect(get.status).toBe(200);
    expect([get.body.grid.name, ids(get.body.pinGroups), get.body.lastReports, get.body.notificationLevel, get.body.photo]).toEqual([
      'Route west',
      [b.hashId, a.hashId],
      [],
      0,
      null,
    ]);
    // the same grid through its pin group grid name
    expect((await c.request<{ grid: Grid }>('GET', `/graph/pin-group-grid/${add.body.hashId}`)).body.grid).toEqual(get.body.grid);
    const upd = await c.request<{ grid: Grid; pinGroups: { hashId: string }[]; lastReports: unknown[] }>('POST', `/graph/grid/${add.body.hashId}`, {
      fields: { id: 'Route W' },
      pinGroupHashIds: [a.hashId],
    });
    expect([upd.status, upd.body.grid.name, ids(upd.body.pinGroups), upd.body.lastReports]).toEqual([200, 'Route W', [a.hashId], []]);
    expectParameterError(
      await c.request('POST', '/graph/grid', { fields: { id: 'g' }, pinGroupHashIds: Array.from({ length: 91 }, (_, i) => `x${i}`) }),
      'pinGroupHashIds',
      '90',
    );
    expectParameterError(await c.request('POST', `/graph/grid/${add.body.hashId}`, { pinGroupHashIds: [a.hashId, 'nothere'] }), 'pinGroupHashIds[1]');
    expectParameterError(
      await c.request('POST', '/graph/grid', { fields: { id: 'g' }, pinGroupHashIds: [(await addPinGroup(other)).hashId] }),
      'pinGroupHashIds[0]',
    );
    // a pin grid is not reached by the pin group grid routes
    const pinGrid = (await c.request<{ hashId: string }>('POST', '/graph/pin-grid', { fields: { id: 'pins' } })).body.hashId;
    expect((await c.request('GET', `/graph/grid/${pinGrid}`)).status).toBe(404);
    for (const [m, u] of [
      ['GET', `/graph/grid/${add.body.hashId}`],
      ['POST', `/graph/grid/${add.body.hashId}`],
    ] as const) {
      expect((await other.request<ErrorBody>(m, u, m === 'POST' ? { fields: { id: 'stolen' } } : undefined)).status, `${m} ${u}`).toBe(404);
    }
    expect((await c.request<{ grid: Grid }>('GET', `/graph/grid/${add.body.hashId}`)).body.grid.name).toBe('Route W');
  });

  it('limits and references: 90 members on add, 90 / 10,000 on update, 30 grids per object; unknown or foreign members; all or nothing', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC']);
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    const foreign = await addPinGroup(other);
    const pg = await addPinGroup(c);
    const pin = await addPin(c, pg.hashId, 'p');
    const n = (k: number) => Array.from({ length: k }, (_, i) => `x${i}`);
    expectParameterError(await c.request('POST', '/graph/pin-grid', { fields: { id: 'g' }, pinHashIds: n(91) }), 'pinHashIds', '90');
    expectParameterError(await c.request('POST', '/graph/pin-group-grid', { fields: { id: 'g' }, pinGroupHashIds: n(91) }), 'pinGroupHashIds', '90');
    const grid = (await c.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'g' } })).body.hashId;
    const pinGrid = (await c.request<{ hashId: string }>('POST', '/graph/pin-grid', { fields: { id: 'pg' } })).body.hashId;
    expectParameterError(await c.request('POST', `/graph/pin-grid/${pinGrid}`, { pinHashIds: n(91) }), 'pinHashIds', '90');
    expectParameterError(await c.request('POST', `/graph/pin-group-grid/${grid}`, { pinGroupHashIds: n(10_001) }), 'pinGroupHashIds', '10000');
    // 10,000 is allowed by the limit (then every one must exist)
    expectParameterError(await c.request('POST', `/graph/pin-group-grid/${grid}`, { pinGroupHashIds: n(10_000) }), 'pinGroupHashIds[0]');
    expectParameterError(
      await c.request('POST', '/graph/pin-group', { symbolKey: 's', geometry: null, fields: { id: 'x' }, gridHashIds: n(31) }),
      'gridHashIds',
      '30',
    );
    expectParameterError(await c.request('POST', `/graph/pin-group-grid/${grid}`, { pinGroupHashIds: [pg.hashId, foreign.hashId] }), 'pinGroupHashIds[1]');
    expectParameterError(await c.request('POST', `/graph/pin-group-grid/${grid}`, { pinGroupHashIds: [pg.hashId, pg.hashId] }), 'pinGroupHashIds[1]', 'twice');
    expectParameterError(await c.request('POST', `/graph/pin-group/${pg.hashId}`, { gridHashIds: [pinGrid] }), 'gridHashIds[0]');
    expectParameterError(await c.request('POST', `/graph/pin/${pin.hashId}`, { pinGridsHashIds: [grid] }), 'pinGridsHashIds[0]');
    expectParameterError(await c.request('POST', '/graph/pin-group-grid', { fields: { id: 'g', nope: 1 } }), 'fields.nope');
    // refused requests changed nothing
    expect((await c.request<{ pinGroups: unknown[] }>('GET', `/graph/pin-group-grid/${grid}`)).body.pinGroups).toEqual([]);
    expect(await findAll(c, '/graph/grid')).toHaveLength(2);
    // another environment reaches none of it
    for (const [m, u] of [
      ['GET', `/graph/pin-group-grid/${grid}`],
      ['GET', `/graph/pin-grid/${pinGrid}`],
      ['DELETE', `/graph/grid/${grid}`],
      ['POST', `/graph/pin-group-grid/${grid}`],
    ] as const) {
      expect((await other.request<ErrorBody>(m, u, m === 'POST' ? {} : undefined)).status, `${m} ${u}`).toBe(404);
    }
    expect(await findAll(other, '/graph/grid')).toEqual([]);
  });
});

describe('graph find and locations update', () => {
  it('finds pin groups and pin group grids by name, paged; updates up to 30 geometries all or none', async () => {
    const c = await api.login('monitoring', ['READ', 'STATIC', 'ENVIRONMENT_ADMIN']);
    const a = await addPinGroup(c, 'Station alpha');
    const b = await addPinGroup(c, 'Station bravo');
    const g = (await c.request<{ hashId: string }>('POST', '/graph/pin-group-grid', { fields: { id: 'Station grid' } })).body.hashId;
    await c.request('POST', '/graph/pin-grid', { fields: { id: 'Station pins' } });
    const rows = await findAll<{ objectType: string; hashId: string; name: string }>(c, '/graph/?search=station&descending=false', 2);
    expect(rows).toEqual([
      { objectType: 'pinGroup', hashId: a.hashId, name: 'Station alpha' },
      { objectType: 'pinGroup', hashId: b.hashId, name: 'Station bravo' },
      { objectType: 'grid', hashId: g, name: 'Station grid' },
    ]);
    const point = (x: number, y: number) => ({ type: 'Point', coordinates: [x, y] });
    expect(
      (
        await c.request('POST', '/graph/', [
          { type: 'pinGroup', hashId: a.hashId, geometry: point(4, 51) },
          { type: 'pinGroup', hashId: b.hashId, geometry: point(6, 53) },
        ])
      ).status,
    ).toBe(204);
    expect((await c.request<{ pinGroup: { geometry: unknown } }>('GET', `/graph/pin-group/${a.hashId}`)).body.pinGroup.geometry).toEqual(point(4, 51));
    expect((await c.request<{ environment: { boundingBox: unknown } }>('GET', `/environment/${c.environmentHashId}`)).body.environment.boundingBox).toEqual({
      type: 'LineString',
      coordinates: [
        [4, 51],
        [6, 53],
      ],
    });
    // one unknown: nothing moves
    expect(
      (
        await c.request('POST', '/graph/', [
          { type: 'pinGroup', hashId: a.hashId, geometry: point(1, 1) },
          { type: 'pinGroup', hashId: 'nothere', geometry: null },
        ])
      ).status,
    ).toBe(404);
    expect((await c.request<{ pinGroup: { geometry: unknown } }>('GET', `/graph/pin-group/${a.hashId}`)).body.pinGroup.geometry).toEqual(point(4, 51));
    expectParameterError(
      await c.request(
        'POST',
        '/graph/',
        Array.from({ length: 31 }, () => ({ type: 'pinGroup', hashId: a.hashId, geometry: null })),
      ),
      '30',
    );
    expectParameterError(await c.request('POST', '/graph/', [{ type: 'pinGroup', hashId: a.hashId, geometry: point(200, 1) }]), 'geometry');
    const other = await api.login('monitoring', ['READ', 'STATIC']);
    expect(await findAll(other, '/graph/?search=station')).toEqual([]);
    expect((await other.request('POST', '/graph/', [{ type: 'pinGroup', hashId: a.hashId, geometry: null }])).status).toBe(404);
  });
});
