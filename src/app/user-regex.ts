// Regular expressions written by users (a field configuration's `regex`) run on RE2's engine
// (re2js, a pure-JavaScript port): matching takes time linear in the input, so a pattern such as
// `(a+)+$` cannot hold the event loop. Constructs that need backtracking (lookaround,
// backreferences) are not RE2 syntax; such a pattern is refused when it is saved.
//
// Why re2js and not the native `re2` addon: the addon builds RE2 and abseil from source with
// node-gyp when no prebuilt binary can be downloaded (minutes on this 2-core machine, and on every
// fresh machine and CI run), while re2js installs as plain JavaScript. Field values are short, so
// its lower speed does not matter here.

import { RE2JS } from 're2js';

/** The longest pattern accepted; the configuration schema states it too. */
export const USER_REGEX_MAX_LENGTH = 1024;

export type UserRegex = { ok: true; test(value: string): boolean } | { ok: false; reason: string };

const compiled = new Map<string, UserRegex>();
const CACHE_ENTRIES = 1000;

/** Compiles a user's pattern with RE2 (unanchored search, like RegExp.prototype.test), or says why it cannot. */
export function compileUserRegex(pattern: string): UserRegex {
  const hit = compiled.get(pattern);
  if (hit) return hit;
  let result: UserRegex;
  if (pattern.length > USER_REGEX_MAX_LENGTH) {
    result = { ok: false, reason: `is longer than ${USER_REGEX_MAX_LENGTH} characters` };
  } else {
    try {
      const re = RE2JS.compile(pattern);
      result = { ok: true, test: (value) => re.matcher(value).find() };
    } catch (err) {
      result = { ok: false, reason: `is not a regular expression the linear-time engine (RE2 syntax) accepts: ${(err as Error).message}` };
    }
  }
  if (compiled.size >= CACHE_ENTRIES) compiled.delete(compiled.keys().next().value as string);
  compiled.set(pattern, result);
  return result;
}
