// The command line of every script (npm run bench, fleet, certs, bench:fuzz, scripts/sdk-check.ts): node:util's
// parseArgs with one table of options, each with its one-line description, so the usage is written once and always
// matches what is accepted. `--help` prints the usage (exit 0); an unknown option, a missing value or a value outside
// its choices prints one line naming it and the usage (exit 2): a mistyped flag is the caller's mistake, not a crash,
// so it never ends in a stack trace.
import { writeSync } from 'node:fs';
import { parseArgs } from 'node:util';

export interface CliOption {
  type: 'string' | 'boolean';
  /** one line for the usage */
  description: string;
  default?: string;
  /** the value's name in the usage (`--seconds <n>`); 'value' when not given */
  placeholder?: string;
  /** the only values accepted */
  choices?: readonly string[];
  /** the value must be a number (a count, a port, seconds) */
  number?: boolean;
}

export type CliOptions = Record<string, CliOption>;

type ValueOf<O extends CliOption> = O['type'] extends 'boolean' ? boolean : O extends { default: string } ? string : string | undefined;
export type CliValues<T extends CliOptions> = { [K in keyof T]: ValueOf<T[K]> };

export interface CliParsed<T extends CliOptions> {
  values: CliValues<T>;
  positionals: string[];
  /** the options written on the command line (not taken from a default) */
  given: ReadonlySet<string>;
}

/** What a command line asked for: its values, the usage, or a mistake in one line. */
export type CliOutcome<T extends CliOptions> = { kind: 'ok'; parsed: CliParsed<T> } | { kind: 'help' } | { kind: 'error'; message: string };

export interface CliShape {
  /** how to call it, and what it does: printed above the options */
  usage: string;
  /** positional arguments are accepted (the caller checks them) */
  positionals?: boolean;
}

/** Parses `args` against `options` without printing or exiting (see parseCli). */
export function readCli<const T extends CliOptions>(args: readonly string[], options: T, shape: CliShape): CliOutcome<T> {
  // strict off, then every token checked here: the messages name the option as typed, in one line, and stay ours
  // rather than node's (which suggest `--` tricks for an unknown option)
  const { tokens } = parseArgs({
    args: [...args],
    strict: false,
    allowPositionals: true,
    tokens: true,
    options: Object.fromEntries(Object.entries(options).map(([name, o]) => [name, { type: o.type }])),
  });
  // asked for the usage: that answers whatever else is on the line
  if (tokens.some((t) => t.kind === 'option' && (t.name === 'help' || t.rawName === '-h'))) return { kind: 'help' };
  const found = new Map<string, string | boolean>();
  const positionals: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'option-terminator') continue;
    if (token.kind === 'positional') {
      if (!shape.positionals) return { kind: 'error', message: `unexpected argument ${JSON.stringify(token.value)}` };
      positionals.push(token.value);
      continue;
    }
    const option = options[token.name];
    if (!option || token.rawName.length === 2) return { kind: 'error', message: `unknown option ${token.rawName}` };
    if (option.type === 'boolean') {
      if (token.inlineValue) return { kind: 'error', message: `${token.rawName} takes no value` };
      found.set(token.name, true);
      continue;
    }
    // `--seconds --warmup 3`: the next option is not the value of the one before it
    if (token.value === undefined || (!token.inlineValue && token.value.startsWith('--'))) return { kind: 'error', message: `${token.rawName} needs a value` };
    if (option.choices && !option.choices.includes(token.value))
      return { kind: 'error', message: `${token.rawName} takes ${option.choices.join(' or ')}, not ${JSON.stringify(token.value)}` };
    if (option.number && (token.value.trim() === '' || !Number.isFinite(Number(token.value))))
      return { kind: 'error', message: `${token.rawName} takes a number, not ${JSON.stringify(token.value)}` };
    found.set(token.name, token.value);
  }
  const values = Object.fromEntries(
    Object.entries(options).map(([name, o]) => [name, found.get(name) ?? (o.type === 'boolean' ? false : o.default)]),
  ) as CliValues<T>;
  return { kind: 'ok', parsed: { values, positionals, given: new Set(found.keys()) } };
}

/** The usage: the caller's text, then one line per option with its default. */
export function formatUsage(options: CliOptions, shape: CliShape): string {
  const left = (name: string, o: CliOption) => `--${name}${o.type === 'string' ? ` <${o.placeholder ?? o.choices?.join('|') ?? 'value'}>` : ''}`;
  const lines = [
    ...Object.entries(options).map(([name, o]) => [left(name, o), `${o.description}${o.default !== undefined ? ` (default ${o.default})` : ''}`]),
    ['-h, --help', 'print this text'],
  ];
  const width = Math.min(34, Math.max(...lines.map(([l]) => l.length)));
  const table = lines.map(([l, d]) => (l.length > width ? `  ${l}\n  ${''.padEnd(width)}  ${d}` : `  ${l.padEnd(width)}  ${d}`));
  return `${shape.usage.trimEnd()}\n\noptions:\n${table.join('\n')}\n`;
}

/** A command line's mistake: one line naming it, then the usage, on stderr; exit 2. */
export function failCli(message: string, options: CliOptions, shape: CliShape): never {
  // written synchronously: process.exit right after must not cut the text short on a pipe
  writeSync(2, `${message}\n\n${formatUsage(options, shape)}`);
  process.exit(2);
}

/**
 * The script's command line (process.argv): its values on success; prints the usage and exits 0 on --help; prints the
 * mistake and the usage and exits 2 otherwise. `fail` reports a mistake the script finds itself the same way.
 */
export function parseCli<const T extends CliOptions>(
  options: T,
  shape: CliShape,
  args: readonly string[] = process.argv.slice(2),
): CliParsed<T> & { fail(message: string): never } {
  const outcome = readCli(args, options, shape);
  if (outcome.kind === 'help') {
    writeSync(1, formatUsage(options, shape));
    process.exit(0);
  }
  if (outcome.kind === 'error') failCli(outcome.message, options, shape);
  return { ...outcome.parsed, fail: (message: string) => failCli(message, options, shape) };
}
