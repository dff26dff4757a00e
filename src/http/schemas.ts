import { Type, type TSchema } from '@sinclair/typebox';
import { USER_REGEX_MAX_LENGTH } from '../app/user-regex.ts';

/** Schemas shared by many routes. */
export const HashId = Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9]+$' });
export const HashIdParams = Type.Object({ hashId: HashId });
// a translation is a string or, as the SDK's translations model allows, a pluralised {singular, plural}
const Translation = Type.Union([
  Type.String({ maxLength: 255 }),
  Type.Object({ singular: Type.String({ maxLength: 255 }), plural: Type.String({ maxLength: 255 }) }, { additionalProperties: false }),
]);
export const StringOrTranslations = Type.Union([
  Type.String({ minLength: 1, maxLength: 255 }),
  Type.Object({ en: Translation }, { additionalProperties: Translation }),
]);
export const ValuePair = Type.Object({
  orderOfMagnitude: Type.Integer({ minimum: -128, maximum: 127 }),
  significand: Type.Integer({ minimum: -2147483648, maximum: 2147483647 }),
});
export const Timestamp = Type.String({ format: 'date-time' });
export const FieldConfiguration = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 64 }),
    type: Type.Optional(Type.String()),
    // checked with the linear-time engine that later runs it (src/app/user-regex.ts, src/http/validation.ts)
    regex: Type.Optional(Type.Union([Type.String({ maxLength: USER_REGEX_MAX_LENGTH, userRegex: true }), Type.Null()])),
  },
  { additionalProperties: true },
);
export const FieldConfigurations = Type.Array(FieldConfiguration, { maxItems: 50 });
/** An update's configuration array: each item a configuration or the SDK's `{existingKey, fieldConfiguration}`. */
export const UpdatableFieldConfigurations = Type.Array(
  Type.Union([
    FieldConfiguration,
    Type.Object({ existingKey: Type.Optional(Type.String()), fieldConfiguration: FieldConfiguration }, { additionalProperties: false }),
  ]),
  { maxItems: 50 },
);
export const Fields = Type.Record(Type.String(), Type.Unknown());
const Color = Type.String({ pattern: '^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$' });
const Colors = Type.Object(Object.fromEntries(['primary', 'secondary', 'accent', 'error', 'warning', 'info', 'success', 'neutral'].map((k) => [k, Color])), {
  additionalProperties: false,
});
/** An environment's (or supplier's) colours, light and optionally dark. */
export const Theme = Type.Object({ light: Colors, dark: Type.Optional(Colors) }, { additionalProperties: false });

export const FindQuery = Type.Object({
  sortBy: Type.Optional(Type.String()),
  descending: Type.Optional(Type.Boolean()),
  rowsPerPage: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  search: Type.Optional(Type.String({ maxLength: 255 })),
  offset: Type.Optional(Type.String({ maxLength: 1024 })),
  updatedAfter: Type.Optional(Timestamp),
});

export function Page<T extends TSchema>(row: T) {
  return Type.Object({ nextPageOffset: Type.Union([Type.String(), Type.Null()]), rows: Type.Array(row) });
}

export const NoContent = { 204: Type.Null() };
