// Text PostgreSQL cannot store: NUL (U+0000) in text and jsonb, and unpaired UTF-16 surrogates in
// jsonb (JSON.stringify writes them as \udXXX escapes, which jsonb refuses). Devices and supplier
// code can produce both; at the storage boundary they become U+FFFD, and the caller says so.

// eslint-disable-next-line no-control-regex -- NUL is what is looked for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
// eslint-disable-next-line no-control-regex -- NUL is what is looked for
const UNSTORABLE_ONE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export const REPLACEMENT = '\ufffd';

export function hasUnstorable(text: string): boolean {
  return UNSTORABLE_ONE.test(text);
}

/** The text with every NUL and unpaired surrogate replaced by U+FFFD, and how many were. */
export function storableText(text: string): { text: string; replaced: number } {
  let replaced = 0;
  const out = text.replace(UNSTORABLE, () => {
    replaced++;
    return REPLACEMENT;
  });
  return { text: out, replaced };
}

/** A copy of a JSON-like value with every unstorable character (in strings and keys) replaced; the value itself when there is none. */
export function storableValue<T>(value: T): { value: T; replaced: number } {
  const json = JSON.stringify(value);
  if (json === undefined) return { value, replaced: 0 };
  const clean = storableJson(json);
  return clean.replaced === 0 ? { value, replaced: 0 } : { value: JSON.parse(clean.json) as T, replaced: clean.replaced };
}

/** Where the first unstorable character of a JSON-like value is (`fields.a`, `list[2]`), or null. */
export function unstorablePath(value: unknown, path = ''): string | null {
  if (typeof value === 'string') return hasUnstorable(value) ? path || 'the value' : null;
  if (value === null || typeof value !== 'object') return null;
  for (const [key, v] of Object.entries(value)) {
    const at = Array.isArray(value) ? `${path}[${key}]` : /^[A-Za-z_$][\w$]*$/.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`;
    if (hasUnstorable(key)) return `the key ${at}`;
    const inner = unstorablePath(v, at);
    if (inner) return inner;
  }
  return null;
}

// in JSON.stringify's output a NUL is always `\u0000` and an unpaired surrogate always a `\udXXX`
// escape (paired ones are written as they are); an escape follows an even number of backslashes
const ESCAPED_UNSTORABLE = /(?<!\\)((?:\\\\)*)\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})/g;
const MAYBE_ESCAPED = /\\u(?:0000|[dD][89a-fA-F])/;

/** The same replacement on JSON text written by JSON.stringify. */
export function storableJson(json: string): { json: string; replaced: number } {
  if (!MAYBE_ESCAPED.test(json)) return { json, replaced: 0 };
  let replaced = 0;
  const out = json.replace(ESCAPED_UNSTORABLE, (_whole, backslashes: string) => {
    replaced++;
    return `${backslashes}\\ufffd`;
  });
  return { json: out, replaced };
}

/** The error line an activity gets when characters were replaced. */
export function replacedMessage(replaced: number, what: string): string {
  return `${replaced} character${replaced === 1 ? '' : 's'} that cannot be stored (NUL, unpaired surrogate) in ${what} replaced by U+FFFD`;
}
