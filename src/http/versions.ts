// Answers in the shapes of an older Api-Version. Objects are stored and built in the newest shape
// (Api-Version 8); this walk rewrites, in one place, what the original SDK's versioned models define
// differently for older versions, wherever the objects sit in an answer (a device find row's
// deviceType, an activity's commandType, an observation's quantity):
//   - names of quantities, device types (and their channels and charts), command types and report
//     types are translation objects only from 7: up to 6 they are answered as plain text;
//   - a quantity's unit is nullable only from 8: before, a quantity without a unit is answered with
//     NO_UNIT (the SDK's older models require a non-empty string);
//   - a field configuration of type hashId (a pin group or pin picker) exists only in SDK releases
//     that send 8: before, it is answered as the string text field that holds the same value
//     (older models refuse the whole list otherwise);
//   - up to 6 a translations object is {en: string, nl: string}, both present, never pluralised:
//     the texts of a field configuration (name, hint, prefix, suffix, option texts) in any other
//     form are answered as plain text.

type Json = unknown;
type Obj = Record<string, Json>;

/** The unit older versions see for a quantity without one. */
export const NO_UNIT = '-';
/** The first version whose names may be translation objects. */
const TRANSLATED_NAMES_FROM = 7;
/** The first version in which a quantity's unit may be null. */
const NULLABLE_UNIT_FROM = 8;
/** The first version whose SDK releases all know hashId field configurations. */
const HASH_ID_FIELDS_FROM = 8;

const isObject = (v: Json): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date) && !Buffer.isBuffer(v);

/** The display text of a stringOrTranslations (English, else the first translation). */
export function plainName(name: Json): Json {
  if (!isObject(name)) return name;
  const text = name.en ?? Object.values(name)[0];
  // a pluralised translation ({singular, plural}) reads as its singular
  return isObject(text) ? (text.singular ?? text.plural ?? '') : (text ?? '');
}

function names(o: Obj, version: number, keys: string[]): Obj {
  if (version >= TRANSLATED_NAMES_FROM) return o;
  const out = { ...o };
  for (const key of keys) if (isObject(out[key])) out[key] = plainName(out[key]);
  return out;
}

function quantity(q: Json, version: number): Json {
  if (!isObject(q) || !('unit' in q)) return q;
  const out = names(q, version, ['name']);
  return version < NULLABLE_UNIT_FROM && (out.unit === null || out.unit === '') ? { ...out, unit: NO_UNIT } : out;
}

const titled = (items: Json, version: number) => (Array.isArray(items) ? items.map((c) => (isObject(c) ? names(c, version, ['title']) : c)) : items);

function deviceType(t: Json, version: number): Json {
  if (!isObject(t) || version >= TRANSLATED_NAMES_FROM) return t;
  const out = names(t, version, ['name']);
  if (Array.isArray(out.channels)) {
    out.channels = out.channels.map((c) =>
      isObject(c) ? { ...names(c, version, ['name', 'defaultPinName']), ...(c.charts ? { charts: titled(c.charts, version) } : {}) } : c,
    );
  }
  if (out.charts) out.charts = titled(out.charts, version);
  return out;
}

/** A command type or report type: only its name differs by version. */
const commandType = (t: Json, version: number): Json => (isObject(t) ? names(t, version, ['name']) : t);

/** A translations object as SDK releases up to Api-Version 6 take it, else its plain text. */
function legacyTranslations(t: Json): Json {
  if (!isObject(t) || (typeof t.en === 'string' && typeof t.nl === 'string')) return t;
  return plainName(t);
}

function fieldConfiguration(c: Json, version: number): Json {
  if (!isObject(c)) return c;
  let out = c;
  if (version < HASH_ID_FIELDS_FROM && c.type === 'hashId') out = { ...out, type: 'string', inputType: 'text' };
  if (version < TRANSLATED_NAMES_FROM) {
    out = { ...out };
    for (const key of ['name', 'hint', 'prefix', 'suffix']) if (isObject(out[key])) out[key] = legacyTranslations(out[key]);
    if (Array.isArray(out.valueOptions))
      out.valueOptions = out.valueOptions.map((o) => (isObject(o) && isObject(o.text) ? { ...o, text: legacyTranslations(o.text) } : o));
  }
  return out;
}

/** A list of field configurations, or an object of such lists (a report type's or an environment's). */
function fieldConfigurations(value: Json, version: number): Json {
  if (Array.isArray(value)) return value.map((c) => fieldConfiguration(c, version));
  if (!isObject(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, list]) => [k, Array.isArray(list) ? list.map((c) => fieldConfiguration(c, version)) : list]));
}

type Shaper = (value: Json, version: number) => Json;
// by the key an object sits under (Maps: a key such as `constructor` finds nothing)
const BY_KEY = new Map<string, Shaper>([
  ['quantity', quantity],
  ['environmentQuantity', quantity],
  ['deviceType', deviceType],
  ['commandType', commandType],
  ['reportType', commandType],
  ['fieldConfigurations', fieldConfigurations],
  ['pinGroupFieldConfigurations', fieldConfigurations],
  ['pinFieldConfigurations', fieldConfigurations],
]);
const LISTS = new Map<string, Shaper>([
  ['linkedSupplierQuantities', quantity],
  ['chartQuantities', quantity],
  ['quantities', quantity],
  ['commandTypes', commandType],
  ['reportTypes', commandType],
]);

function walk(value: Json, version: number): Json {
  if (Array.isArray(value)) return value.map((v) => walk(v, version));
  if (!isObject(value)) return value;
  const out: Obj = {};
  for (const [key, child] of Object.entries(value)) {
    const walked = walk(child, version);
    const one = BY_KEY.get(key);
    const list = LISTS.get(key);
    out[key] = one ? one(walked, version) : list && Array.isArray(walked) ? walked.map((v) => list(v, version)) : walked;
  }
  return out;
}

/** `payload` as Api-Version `version` answers it (unchanged for the newest). */
export function shapeForVersion<T>(payload: T, version: number): T {
  if (version >= NULLABLE_UNIT_FROM) return payload;
  return walk(payload, version) as T;
}
