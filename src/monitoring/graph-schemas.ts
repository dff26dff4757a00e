import { Type } from '@sinclair/typebox';
import { ParameterError } from '../app/errors.ts';
import { Fields } from '../http/schemas.ts';

/** Schemas the graph's routes share (pin groups, pins, edges, grids). */
export const Point = Type.Object(
  {
    type: Type.Literal('Point'),
    coordinates: Type.Tuple([Type.Number({ minimum: -180, maximum: 180 }), Type.Number({ minimum: -90, maximum: 90 })]),
  },
  { additionalProperties: false },
);
export const FieldsUpdate = Type.Union([
  Fields,
  Type.Array(Type.Object({ key: Type.String({ minLength: 1 }), value: Type.Unknown() }, { additionalProperties: false })),
]);
/** a base64 data URL, at most 5 MiB of text */
export const Photo = Type.String({ pattern: '^data:', maxLength: 5 * 1024 * 1024 });
export const MapLayerKey = Type.String({ minLength: 1, maxLength: 64, not: Type.Const('nodes') });

export const readRights = { monitoring: 'READ' };
export const staticRights = { monitoring: 'STATIC' };

const Coordinate = Type.Tuple([Type.Number({ minimum: -180, maximum: 180 }), Type.Number({ minimum: -90, maximum: 90 })]);

/**
 * The points one edge holds at most, all its lines together. A pipe or cable traced every 5 m over 50 km is
 * 10,000 points; an edge is the stretch between two nodes, and a network is many edges. Past it, storing
 * an edge (its bounding box and triggers) and drawing every tile it crosses cost seconds (issue 38: an
 * edge of 500,000 points took 43 s to add and 6-20 s per zoom-4 tile).
 */
export const MAX_EDGE_POINTS = 10_000;

const Line = Type.Array(Coordinate, { minItems: 2, maxItems: MAX_EDGE_POINTS });
/** An edge's line: 2..MAX_EDGE_POINTS points, or 1..500 such lines of MAX_EDGE_POINTS points in all (checkEdgeGeometry). */
export const EdgeGeometry = Type.Union(
  [
    Type.Object({ type: Type.Literal('LineString'), coordinates: Line }, { additionalProperties: false }),
    Type.Object({ type: Type.Literal('MultiLineString'), coordinates: Type.Array(Line, { minItems: 1, maxItems: 500 }) }, { additionalProperties: false }),
  ],
  { description: `a LineString or MultiLineString of at most ${MAX_EDGE_POINTS} points in all, each [lon -180..180, lat -90..90]` },
);

/** What the schema cannot say of an edge's geometry: its lines' points together are MAX_EDGE_POINTS at most (a parameter_error naming `field`). */
export function checkEdgeGeometry(geometry: { type: string; coordinates: unknown[] }, field = 'geometry'): void {
  if (geometry.type !== 'MultiLineString') return;
  let points = 0;
  for (const line of geometry.coordinates as unknown[][]) points += line.length;
  if (points > MAX_EDGE_POINTS)
    throw new ParameterError(`${field}.coordinates: an edge holds at most ${MAX_EDGE_POINTS} points in all its lines; this one has ${points}`);
}
