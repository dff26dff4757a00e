// The doc runner can fail: a command that fails, a check that does not hold and a check never reached each turn
// the walkthrough's test red (test/docs/walkthrough.test.ts).
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { failedChecks, matches, runScript, scriptOf, shellBlocks } from './doc-blocks.ts';

const page = (...blocks: string[]) => blocks.map((b) => `Some prose.\n\n\`\`\`sh\n${b}\n\`\`\`\n`).join('\n');
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

async function run(markdown: string) {
  const { script, checks } = scriptOf(shellBlocks(markdown));
  const result = await runScript(script, { cwd: os.tmpdir(), env, timeoutMs: 10_000 });
  return { result, failures: failedChecks('page.md', checks, result) };
}

describe('doc blocks', () => {
  it('takes the sh blocks, an indented one out of its indent, and leaves other fences', () => {
    const blocks = shellBlocks('```sh\necho a\n```\n\n```ts\nconst x = 1;\n```\n\n- item:\n\n  ```sh\n  echo b\n  ```\n');
    expect(blocks).toEqual([
      { line: 1, code: 'echo a' },
      { line: 11, code: 'echo b' },
    ]);
  });

  it('reads a check loosely: gaps, whitespace, a prose tail and continuation lines', () => {
    const { checks } = scriptOf(shellBlocks(page('echo x\n# → {"a": 1, ... "b": 2,   (prose)\n#   "c": 3}   (more prose)')));
    expect(checks).toEqual([{ id: 0, line: 5, expected: '{"a": 1, ... "b": 2, "c": 3}' }]);
    expect(matches(checks[0].expected, '{\n  "a": 1,\n  "z": 0,\n  "b": 2,\n  "c": 3\n}')).toBe(true);
    expect(matches(checks[0].expected, '{"b": 2, "a": 1, "c": 3}')).toBe(false);
  });

  it('carries variables from one block to the next and checks each output since the last check', async () => {
    const { result, failures } = await run(page('X=hello\necho "$X"\n# → hello', 'echo "$X world"\n# → hello world'));
    expect(result.code).toBe(0);
    expect(failures).toEqual([]);
  });

  it('fails on a check that does not hold', async () => {
    const { result, failures } = await run(page('echo \'{"commands":["reboot"]}\'\n# → {"commands":[]}'));
    expect(result.code).toBe(0);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(/^page\.md:5: expected \{"commands":\[\]\}/);
  });

  it('stops at a failing command (set -e, pipefail), naming it, and the checks after it fail as not reached', async () => {
    const { result, failures } = await run(page('false | cat\necho never\n# → never'));
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('doc command failed (exit 1)');
    expect(failures).toEqual(['page.md:6: not reached (bash exited 1)']);
  });

  it('fails on an unset variable (set -u)', async () => {
    const { result } = await run(page('echo "$NOT_SET_ANYWHERE"'));
    expect(result.code).not.toBe(0);
  });
});
