import { ParameterError } from './errors.ts';
import { compileUserRegex } from './user-regex.ts';

/** One entry of a field configuration array (device types, environments' graph objects, report types). */
export interface FieldConfiguration {
  key: string;
  type?: string;
  [member: string]: unknown;
}

export type Fields = Record<string, unknown>;
/** `fieldsToServerUpdate`: the whole object, or a list of `{key, value}` changes. */
export type FieldsUpdate = Fields | { key: string; value: unknown }[];

const FILE_INPUTS = new Set(['file', 'files']);

/** The value type a configuration governs; the SDK lets `type` default from `inputType` and the valueOptions. */
function typeOf(config: FieldConfiguration): string {
  if (typeof config.type === 'string') return config.type;
  if (config.inputType === 'switch' || config.inputType === 'checkbox') return 'boolean';
  if (config.inputType === 'pinGroupHashId' || config.inputType === 'pinHashId') return 'hashId';
  const first: unknown = Array.isArray(config.valueOptions) ? (config.valueOptions[0] as { value?: unknown } | undefined)?.value : undefined;
  if (typeof first === 'number') return 'number';
  if (typeof first === 'boolean') return 'boolean';
  return 'string';
}

function checkValue(config: FieldConfiguration, value: unknown, path: string): void {
  const at = `${path}.${config.key}`;
  if (value === null) {
    if (config.allowNull === false) throw new ParameterError(`${at} may not be null`);
    return;
  }
  if (FILE_INPUTS.has(config.inputType as string)) throw new ParameterError(`${at}: file fields cannot be set through this operation`);
  const type = typeOf(config);
  const ok =
    type === 'string' || type === 'hashId'
      ? typeof value === 'string'
      : type === 'number'
        ? typeof value === 'number' && Number.isFinite(value)
        : type === 'integer'
          ? Number.isInteger(value)
          : type === 'boolean'
            ? typeof value === 'boolean'
            : true;
  if (!ok) throw new ParameterError(`${at} must be of type ${type}`);
  if (Array.isArray(config.valueOptions) && config.valueOptions.length > 0 && !config.valueOptions.some((o) => (o as { value?: unknown }).value === value)) {
    throw new ParameterError(`${at} must be one of the valueOptions of its field configuration`);
  }
  if (typeof value === 'number') {
    if (typeof config.lowerbound === 'number' && value < config.lowerbound) throw new ParameterError(`${at} must be at least ${config.lowerbound}`);
    if (typeof config.upperbound === 'number' && value > config.upperbound) throw new ParameterError(`${at} must be at most ${config.upperbound}`);
  }
  if (typeof value === 'string' && typeof config.regex === 'string' && config.regex !== '') {
    // linear time whatever the pattern (src/app/user-regex.ts); a pattern stored before RE2 was
    // required and that RE2 cannot compile does not block its form
    const re = compileUserRegex(config.regex);
    if (re.ok && !re.test(value)) throw new ParameterError(`${at} does not match the pattern ${config.regex}`);
  }
}

/** The values a new object starts with: each configured defaultValue. */
export function defaultFields(configs: FieldConfiguration[]): Fields {
  const fields: Fields = {};
  for (const c of configs) if (c.defaultValue !== undefined) fields[c.key] = c.defaultValue;
  return fields;
}

/**
 * Applies a fields update against the configuration that governs it. The object form replaces
 * every field (missing keys fall back to their defaultValue); the list form changes only its keys.
 */
export function applyFieldsUpdate(configs: FieldConfiguration[], current: Fields, update: FieldsUpdate, owner = 'the device type', path = 'fields'): Fields {
  const byKey = new Map(configs.map((c) => [c.key, c]));
  const changes: [string, unknown][] = Array.isArray(update) ? update.map((u) => [u.key, u.value]) : Object.entries(update);
  const next = Array.isArray(update) ? { ...current } : defaultFields(configs);
  for (const [key, value] of changes) {
    const config = byKey.get(key);
    if (!config) throw new ParameterError(`${path}.${key} is not a field of ${owner} (its keys: ${[...byKey.keys()].join(', ') || 'none'})`);
    checkValue(config, value === undefined ? null : value, path);
    next[key] = value === undefined ? null : value;
  }
  // keys the configuration no longer has are dropped on the next write
  for (const key of Object.keys(next)) if (!byKey.has(key)) delete next[key];
  return next;
}

/** The value of the identifier field as text, or null when the type names none or it is empty. */
export function identifierOf(fields: Fields, identifierFieldKey: string | null): string | null {
  if (identifierFieldKey === null) return null;
  const value = fields[identifierFieldKey];
  return value === null || value === undefined ? null : String(value);
}

/** The SDK's update form of a configuration array item: a configuration, or `{existingKey?, fieldConfiguration}`. */
export type UpdatableFieldConfiguration = FieldConfiguration | { existingKey?: string; fieldConfiguration: FieldConfiguration };

/** The plain field configurations of an update's array (`{existingKey?, fieldConfiguration}` items unwrapped). */
export const unwrapConfigurations = (list: UpdatableFieldConfiguration[]): FieldConfiguration[] =>
  list.map((c) => ('fieldConfiguration' in c && !('key' in c) ? (c.fieldConfiguration as FieldConfiguration) : (c as FieldConfiguration)));

/** A parameter_error naming `path` when two configurations share a key. */
export function uniqueKeys(path: string, list: FieldConfiguration[]): void {
  const seen = new Set<string>();
  for (const c of list) {
    if (seen.has(c.key)) throw new ParameterError(`${path}: key ${c.key} is used twice`);
    seen.add(c.key);
  }
}

/** The plain configurations of an update's array, each with a key, none used twice (a parameter_error naming `path`). */
export function plainConfigurations(path: string, list: UpdatableFieldConfiguration[]): FieldConfiguration[] {
  const plain = unwrapConfigurations(list);
  plain.forEach((c, i) => {
    if (typeof c.key !== 'string' || c.key === '') throw new ParameterError(`${path}[${i}].key is required`);
  });
  uniqueKeys(path, plain);
  return plain;
}

/** The name of a graph object: the value of the first field of its configuration, as text; it must not be empty. */
export function nameFromFields(configs: FieldConfiguration[], fields: Fields, path = 'fields'): string {
  const first = configs[0] ? fields[configs[0].key] : undefined;
  const name = first === null || first === undefined ? '' : String(first);
  if (name === '') throw new ParameterError(`${path}.${configs[0]?.key ?? 'id'} is required: the first field of the configuration is the object's name`);
  return name;
}
