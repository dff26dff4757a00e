// Runs a page's shell blocks as a reader would: every ```sh fence in order, in one bash session (so the variables
// of one block are there in the next), with `set -euo pipefail`, and checks each `# → <what comes back>` comment
// against the output of the commands above it (since the previous check).
//
// A check is written for a human and read here loosely, so the doc need not change to be checked:
//   - `…` or `...` stands for anything (the fragments between must come back in that order);
//   - whitespace does not count (jq's pretty print and a one-line comment compare equal);
//   - from two spaces and a `(` on, a line is prose: `# → {"commands":[]}   (the device's answer)`;
//   - the comment goes on over the lines below it that start with `#` and three spaces.
import { spawn } from 'node:child_process';

export interface ShellBlock {
  /** the line of the opening fence (1-based) */
  line: number;
  code: string;
}

export interface DocCheck {
  id: number;
  /** the line of the `# →` comment in the page (1-based) */
  line: number;
  expected: string;
}

export interface DocRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** the output of the commands before each check, by check id; a check the run did not reach has none */
  outputs: Map<number, string>;
}

/** The ```sh blocks of a markdown page, an indented one (inside a list item) taken out of its indent. */
export function shellBlocks(markdown: string): ShellBlock[] {
  const lines = markdown.split('\n');
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)```sh\s*$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1];
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && lines[j] !== `${indent}\`\`\``) body.push(lines[j++].slice(indent.length));
    if (j === lines.length) throw new Error(`the sh block at line ${i + 1} is never closed`);
    blocks.push({ line: i + 1, code: body.join('\n') });
    i = j;
  }
  return blocks;
}

/** The marker a check's place in the script prints: a byte that no command of the page writes. */
const MARK = '\x1e';

/**
 * The blocks as one bash script, a marker printed after each `# →` comment (and its continuation lines), and the
 * checks those comments make.
 */
export function scriptOf(blocks: ShellBlock[]): { script: string; checks: DocCheck[] } {
  const checks: DocCheck[] = [];
  const out: string[] = [
    'set -euo pipefail',
    // a failing command names itself on stderr (set -e alone ends the script silently)
    `trap 'echo "doc command failed (exit $?): $BASH_COMMAND" >&2' ERR`,
    `__doc_mark() { printf '\\n${MARK}%s${MARK}\\n' "$1"; }`,
  ];
  for (const block of blocks) {
    const lines = block.code.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const arrow = /^\s*# → (.*)$/.exec(lines[i]);
      out.push(lines[i]);
      if (!arrow) continue;
      const parts = [arrow[1]];
      const line = block.line + 1 + i;
      while (i + 1 < lines.length && /^\s*# {3}/.test(lines[i + 1])) {
        i += 1;
        out.push(lines[i]);
        parts.push(lines[i].replace(/^\s*# {3}/, ''));
      }
      const expected = parts
        .map((p) => p.replace(/\s{2,}\(.*$/, ''))
        .join(' ')
        .trim();
      const id = checks.length;
      checks.push({ id, line, expected });
      out.push(`__doc_mark ${id}`);
    }
  }
  return { script: `${out.join('\n')}\n`, checks };
}

/** Runs `script` with bash in `cwd` with exactly `env`; killed after `timeoutMs`. */
export function runScript(script: string, opts: { cwd: string; env: Record<string, string>; timeoutMs: number }): Promise<DocRun> {
  return new Promise((resolve, reject) => {
    // a process group of its own: a command of the page still running at the timeout goes with the shell
    const child = spawn('bash', ['--noprofile', '--norc', '-s'], { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${opts.timeoutMs} ms)`;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone already
      }
    }, opts.timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      const outputs = new Map<number, string>();
      const pieces = stdout.split(new RegExp(`\\n${MARK}(\\d+)${MARK}\\n`));
      // split with a capture group: text, id, text, id, ...
      for (let k = 1; k < pieces.length; k += 2) outputs.set(Number(pieces[k]), pieces[k - 1]);
      resolve({ code, stdout, stderr, outputs });
    });
    child.stdin.end(script);
  });
}

const squeeze = (s: string) => s.replace(/\s+/g, '');

/** Whether `output` holds what `expected` says comes back (see the top of this file for how it is read). */
export function matches(expected: string, output: string): boolean {
  const text = squeeze(output);
  let from = 0;
  for (const fragment of expected
    .split(/…|\.\.\./)
    .map(squeeze)
    .filter((f) => f !== '')) {
    const at = text.indexOf(fragment, from);
    if (at < 0) return false;
    from = at + fragment.length;
  }
  return true;
}

/** The checks a run failed, each with the page's line, what it says and what came back; empty when all held. */
export function failedChecks(page: string, checks: DocCheck[], run: DocRun): string[] {
  const failures: string[] = [];
  for (const check of checks) {
    const output = run.outputs.get(check.id);
    if (output === undefined) {
      failures.push(`${page}:${check.line}: not reached (bash exited ${run.code})`);
      // the first check not reached says it for the rest
      break;
    }
    if (!matches(check.expected, output)) failures.push(`${page}:${check.line}: expected ${check.expected}\n  came back: ${output.trim().slice(0, 4000)}`);
  }
  return failures;
}
