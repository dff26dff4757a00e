// The one rule for an e-mail address a tenant gives (users, machine accounts, and anything else that
// mails someone): WHATWG HTML's "valid e-mail address", the rule a browser's <input type=email> applies,
// narrowed to what a mail server delivers to:
//   - local part: 1..64 of the atext characters A-Z a-z 0-9 !#$%&'*+/=?^_`{|}~- and dots, no dot first,
//     last or twice in a row (RFC 5321's dot-string: no quoted strings, no comments);
//   - domain: at least two labels separated by single dots, each 1..63 letters, digits and hyphens, not
//     starting or ending with a hyphen (no address literals, no trailing dot; an IDN in its xn-- form);
//   - at most 254 characters in all (RFC 5321's path limit less its angle brackets).
// Nothing is trimmed or unfolded: an address with a space, a comma, a bracket or a line break in it is
// refused, never cut down to something that looks like one, so a header can never be smuggled through
// an address. The domain is case-insensitive (RFC 5321 §2.4) and kept in lower case; the local part is
// kept as given (its case may matter to the receiving server).

import { ParameterError } from './errors.ts';

export const EMAIL_MAX_LENGTH = 254;
const LOCAL_MAX_LENGTH = 64;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const LOCAL = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+$/;

/** Why `text` is not an address of the rule above; null when it is one. */
export function emailProblem(text: string): string | null {
  if (text.length > EMAIL_MAX_LENGTH) return `has more than ${EMAIL_MAX_LENGTH} characters`;
  const at = text.indexOf('@');
  if (at < 0) return 'has no @';
  const local = text.slice(0, at);
  const domain = text.slice(at + 1);
  if (local === '') return 'has nothing before the @';
  if (local.length > LOCAL_MAX_LENGTH) return `has more than ${LOCAL_MAX_LENGTH} characters before the @`;
  if (!LOCAL.test(local)) return "has a character before the @ other than letters, digits, dots and !#$%&'*+/=?^_`{|}~-";
  if (local.startsWith('.') || local.endsWith('.') || local.includes('..')) return 'has a dot first, last or twice in a row before the @';
  const labels = domain.split('.');
  if (labels.length < 2) return 'has a domain without a dot';
  if (!labels.every((l) => LABEL.test(l)))
    return 'has a domain that is not dot-separated labels of 1 to 63 letters, digits and hyphens (no hyphen first or last)';
  return null;
}

const lowerDomain = (address: string) => {
  const at = address.indexOf('@');
  return `${address.slice(0, at)}@${address.slice(at + 1).toLowerCase()}`;
};

/** The address as it is stored (domain in lower case); 400 parameter_error naming `field` and what is wrong. */
export function checkEmail(text: string, field = 'email'): string {
  const problem = emailProblem(text);
  if (problem !== null) throw new ParameterError(`${field}: not an e-mail address: it ${problem} (docs/decisions.md, e-mail addresses)`);
  return lowerDomain(text);
}
