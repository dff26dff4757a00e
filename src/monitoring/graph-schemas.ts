import { Type } from '@sinclair/typebox';
import { Fields } from '../http/schemas.ts';

/** Schemas the graph's routes share (pin groups, pins, edges, grids). */
export const Point = Type.Object({
  type: Type.Literal('Point'),
  coordinates: Type.Tuple([Type.Number({ minimum: -180, maximum: 180 }), Type.Number({ minimum: -90, maximum: 90 })]),
}, { additionalProperties: false });
export const FieldsUpdate = Type.Union([Fields, Type.Array(Type.Object({ key: Type.String({ minLength: 1 }), value: Type.Unknown() }, { additionalProperties: false }))]);
/** a base64 data URL, at most 5 MiB of text */
export const Photo = Type.String({ pattern: '^data:', maxLength: 5 * 1024 * 1024 });
export const MapLayerKey = Type.String({ minLength: 1, maxLength: 64, not: Type.Const('nodes') });

export const readRights = { monitoring: 'READ' };
export const staticRights = { monitoring: 'STATIC' };

const Coordinate = Type.Tuple([Type.Number({ minimum: -180, maximum: 180 }), Type.Number({ minimum: -90, maximum: 90 })]);
/** An edge's line: 2..5,000 points, or 1..500 such lines */
export const EdgeGeometry = Type.Union([
  Type.Object({ type: Type.Literal('LineString'), coordinates: Type.Array(Coordinate, { minItems: 2, maxItems: 5000 }) }, { additionalProperties: false }),
  Type.Object({ type: Type.Literal('MultiLineString'), coordinates: Type.Array(Type.Array(Coordinate, { minItems: 2, maxItems: 5000 }), { minItems: 1, maxItems: 500 }) }, { additionalProperties: false }),
]);
