// The scripts' command lines as a user meets them: --help prints the usage and exits 0, a mistyped option names
// itself in one line above the usage and exits 2, never a stack trace. Each script runs as a process; none gets far
// enough to start anything.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatUsage, readCli, type CliOptions } from '../../scripts/cli.ts';
import { GROUPS, OPTIONS } from '../../bench/run.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function run(script: string, ...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', path.join(root, script), ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** What a stack trace leaves in the output */
const STACK = /^\s+at |ERR_PARSE_ARGS|Error:/m;

describe('npm run bench (node bench/run.ts)', () => {
  it('--help prints the usage with one described line per option, exit 0', () => {
    const r = run('bench/run.ts', '--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run bench -- \[group \.\.\.\] \[options\]/);
    for (const name of Object.keys(OPTIONS)) expect(r.stdout).toMatch(new RegExp(`^ {2}--${name}( <[^>]+>)? {2,}\\S`, 'm'));
    expect(r.stderr).toBe('');
  });

  it('--list prints every group, one line each, the headline marked, with a rough duration', () => {
    const r = run('bench/run.ts', '--list');
    expect(r.status).toBe(0);
    const lines = r.stdout.split('\n');
    for (const g of GROUPS) {
      const line = lines.find((l) => l.slice(2).startsWith(`${g.name} `));
      expect(line, g.name).toMatch(new RegExp(`^${g.headline ? '\\*' : ' '} ${g.name} +~?\\d+(\\.\\d)?\\+? min`));
    }
    expect(r.stdout).toMatch(/the headline, what npm run bench runs with no group named/);
  });

  it('an unknown option: one line naming it, then the usage, exit 2', () => {
    const r = run('bench/run.ts', '--bogus');
    expect(r.status).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe('unknown option --bogus');
    expect(r.stderr).toMatch(/^usage: npm run bench/m);
    expect(r.stderr).not.toMatch(STACK);
    expect(r.stdout).toBe('');
  });

  it('a malformed value or an unknown group is answered the same way', () => {
    for (const [args, first] of [
      [['--seconds', 'ten'], '--seconds takes a number, not "ten"'],
      [['--coap', 'of'], '--coap takes on or off, not "of"'],
      [['--seconds'], '--seconds needs a value'],
      [['--all=yes'], '--all takes no value'],
      [['--layouts', '4'], '--layouts takes all, none or a list of 1, 2, 3, not "4"'],
      [['tile'], 'unknown group "tile"'],
    ] as const) {
      const r = run('bench/run.ts', ...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr.split('\n')[0]).toContain(first);
      expect(r.stderr).not.toMatch(STACK);
    }
  });
});

describe('the other scripts', () => {
  it.each([
    ['scripts/fleet.ts', /^usage: npm run fleet -- \[options\]/],
    ['scripts/certs.ts', /^usage: npm run certs/],
    ['scripts/sdk-check.ts', /^usage: node scripts\/sdk-check\.ts \[options\]/],
    ['bench/fuzz.ts', /^usage: npm run bench:fuzz -- \[options\]/],
  ])('%s: --help exits 0 with the usage, --bogus exits 2 naming it', (script, usage) => {
    const help = run(script, '--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(usage);
    const bogus = run(script, '--bogus');
    expect(bogus.status).toBe(2);
    expect(bogus.stderr.split('\n')[0]).toBe('unknown option --bogus');
    expect(bogus.stderr.slice(bogus.stderr.indexOf('\n\n') + 2)).toMatch(usage);
    expect(bogus.stderr).not.toMatch(STACK);
  });

  it.each(['certs', 'fleet', 'bench', 'bench:fuzz'])('npm run %s -- --help reaches the script (package.json passes its arguments on)', (script) => {
    const r = spawnSync('npm', ['run', '-s', script, '--', '--help'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: /);
  });

  it('npm run fleet: every option in the usage, a value outside its choices refused', () => {
    const help = run('scripts/fleet.ts', '--help');
    for (const name of ['gateways', 'workers', 'coaps-port', 'https-port', 'api-port', 'dir', 'balance'])
      expect(help.stdout).toMatch(new RegExp(`^ {2}--${name} <`, 'm'));
    const r = run('scripts/fleet.ts', '--balance', 'random');
    expect(r.status).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe('--balance takes round-robin or source, not "random"');
  });
});

describe('readCli', () => {
  const options = {
    seconds: { type: 'string', default: '15', number: true, description: 'measured seconds' },
    mode: { type: 'string', choices: ['on', 'off'], description: 'a switch' },
    verbose: { type: 'boolean', description: 'more output' },
  } as const satisfies CliOptions;

  it('gives defaults, the values given and which options were written', () => {
    const r = readCli(['--mode', 'off', 'x', '--', '--seconds'], options, { usage: 'u', positionals: true });
    expect(r).toEqual({
      kind: 'ok',
      parsed: { values: { seconds: '15', mode: 'off', verbose: false }, positionals: ['x', '--seconds'], given: new Set(['mode']) },
    });
  });

  it('answers -h and --help before any mistake, and names each kind of mistake', () => {
    expect(readCli(['--bogus', '-h'], options, { usage: 'u' })).toEqual({ kind: 'help' });
    const error = (...args: string[]) => {
      const r = readCli(args, options, { usage: 'u' });
      return r.kind === 'error' ? r.message : r.kind;
    };
    expect(error('-x')).toBe('unknown option -x');
    expect(error('--seconds', '--mode', 'on')).toBe('--seconds needs a value');
    expect(error('--seconds=1e3')).toBe('ok');
    expect(error('--verbose=1')).toBe('--verbose takes no value');
    expect(error('stray')).toBe('unexpected argument "stray"');
  });

  it('prints one line per option with its default', () => {
    expect(formatUsage(options, { usage: 'usage: x' })).toBe(`usage: x

options:
  --seconds <value>  measured seconds (default 15)
  --mode <on|off>    a switch
  --verbose          more output
  -h, --help         print this text
`);
  });
});
