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
