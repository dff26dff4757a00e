// The first hour of a new user, as written: docs/walkthrough.md's shell blocks run in one bash session against the
// service started as the page says (a real process, with the mail catcher of `npm run mail-catcher` as its SMTP
// server), and every `# →` comment of the page is checked against what came back (test/docs/doc-blocks.ts). A page
// that drifts from the code turns this red. The README's first block and the commands of docs/fleet.md cannot run
// here whole (they install, test or start a fleet): their commands are checked to exist and to parse.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/settings.ts';
import { freePort, killServiceProcesses, startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { failedChecks, runScript, scriptOf, shellBlocks, type ShellBlock } from './doc-blocks.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (page: string) => readFileSync(path.join(ROOT, page), 'utf8');
const SECRET_KEY = '5a'.repeat(32);

/** Blocks of the walkthrough this test cannot run, by their first line: each is still parsed by bash. */
const NOT_RUN: Record<string, string> = {
  'export PATH="$(bash scripts/node24.sh):$PATH"': 'scripts/sdk-check.ts drives an SDK build fetched from the npm registry',
};
const runnable = (b: ShellBlock) => !(b.code.split('\n')[0] in NOT_RUN);

/** Whether bash parses `code` (bash -n), with its complaint when not. */
function parses(code: string): string {
  const out = spawnSync('bash', ['-n'], { input: code, encoding: 'utf8' });
  return out.status === 0 ? 'parses' : out.stderr;
}

/** `node <script> --help` in the project folder: its exit code and usage. */
function help(script: string): { status: number | null; usage: string } {
  const out = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', script, '--help'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
  return { status: out.status, usage: out.stdout + out.stderr };
}

/** The long options (`--name`) a block passes to `script`. */
function flagsFor(code: string, script: string): string[] {
  const flags = new Set<string>();
  for (const line of code.split('\n').filter((l) => l.includes(script))) for (const m of line.split('#')[0].matchAll(/\s(--[a-z][a-z-]*)/g)) flags.add(m[1]);
  flags.delete('--');
  return [...flags];
}

describe('docs/walkthrough.md', () => {
  let service: ServiceProcess;
  let catcher: ChildProcess;
  const mailDir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-doc-mail-'));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'gridgate-doc-data-'));
  let coapsPort = 0;

  beforeAll(async () => {
    const smtpPort = await freePort();
    // the catcher as `npm run mail-catcher` runs it, on a port and folder of this test's own
    catcher = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', 'scripts/mail-catcher.ts', '--port', String(smtpPort), '--dir', mailDir], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      catcher.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('listening on')) resolve();
      });
      catcher.once('exit', (code) => reject(new Error(`the mail catcher exited with ${code}: ${out}`)));
    });
    coapsPort = await freePort();
    service = await startServiceProcess({
      DATABASE_URL: process.env.DATABASE_URL!,
      DATA_DIR: dataDir,
      SECRET_KEY,
      SMTP_URL: `smtp://127.0.0.1:${smtpPort}`,
      COAPS_PORT: String(coapsPort),
    });
  });

  afterAll(() => {
    killServiceProcesses();
    catcher?.kill('SIGKILL');
  });

  it('runs every block as written, in one shell, and every # → comment holds', async () => {
    const blocks = shellBlocks(read('docs/walkthrough.md'));
    const skipped = blocks.filter((b) => !runnable(b));
    expect(skipped.map((b) => b.code.split('\n')[0])).toEqual(Object.keys(NOT_RUN));
    for (const b of skipped) expect(parses(b.code), `docs/walkthrough.md:${b.line}`).toBe('parses');
    const { script, checks } = scriptOf(blocks.filter(runnable));
    // the ports the page reads from the shell, as a reader whose service does not run on the defaults sets them
    const run = await runScript(script, {
      cwd: ROOT,
      timeoutMs: 240_000,
      env: {
        PATH: process.env.PATH!,
        HOME: process.env.HOME ?? os.tmpdir(),
        LANG: 'C.UTF-8',
        // what the admin CLI needs to reach the running service's database (npm start's shell has the same)
        DATABASE_URL: process.env.DATABASE_URL!,
        SECRET_KEY,
        DATA_DIR: dataDir,
        REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
        API: service.base,
        HTTPS_DEVICE_PORT: String(service.httpsPort),
        COAPS_PORT: String(coapsPort),
        MAIL_DIR: mailDir,
      },
    });
    const failures = failedChecks('docs/walkthrough.md', checks, run);
    expect(failures, run.stderr.slice(-6000)).toEqual([]);
    expect(run.code, run.stderr.slice(-6000)).toBe(0);
    // the checks are the page's own: a page that lost them would pass on nothing
    expect(checks.length).toBeGreaterThanOrEqual(20);
    // the alert the page provokes reached the catcher's folder
    expect(readdirSync(mailDir).filter((f) => f.endsWith('.eml')).length).toBeGreaterThanOrEqual(1);
  }, 300_000);

  it('passes scripts/sdk-check.ts, the command of the block it does not run, only options its --help lists', () => {
    const block = shellBlocks(read('docs/walkthrough.md')).find((b) => !runnable(b))!;
    const sdkCheck = help('scripts/sdk-check.ts');
    expect(sdkCheck.status, sdkCheck.usage).toBe(0);
    const flags = flagsFor(block.code, 'scripts/sdk-check.ts');
    expect(flags).toContain('--provision');
    for (const flag of flags) expect(sdkCheck.usage, flag).toContain(`${flag} `);
  });
});

describe("README.md's first block", () => {
  const block = shellBlocks(read('README.md'))[0];
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;

  it('names npm scripts that exist, running files that exist', () => {
    expect(parses(block.code)).toBe('parses');
    const named = [...block.code.matchAll(/npm (?:run )?([a-z:-]+)/g)].map((m) => m[1]).filter((n) => n !== 'install');
    expect(named).toEqual(['start', 'test']);
    for (const name of named) {
      expect(scripts[name], name).toBeDefined();
      for (const file of scripts[name].match(/scripts\/[\w./-]+\.(?:mjs|ts|sh)/g) ?? []) expect(() => readFileSync(path.join(ROOT, file)), file).not.toThrow();
    }
  });

  it('gives the ports the service takes by default', () => {
    const config = loadConfig({});
    expect(block.code).toContain(`REST API :${config.apiPort}`);
    expect(block.code).toContain(`device HTTPS :${config.httpsDevicePort}`);
    expect(block.code).toContain(`udp/${config.coapsPort}`);
  });
});

describe('docs/fleet.md', () => {
  const page = read('docs/fleet.md');

  it('has blocks bash parses (they start Redis servers and fleets, so they are not run here)', () => {
    for (const b of shellBlocks(page)) expect(parses(b.code), `docs/fleet.md:${b.line}`).toBe('parses');
  });

  it('passes npm run fleet only options its --help lists', () => {
    const fleet = help('scripts/fleet.ts');
    expect(fleet.status, fleet.usage).toBe(0);
    // the commands are in the prose too, as inline code
    const commands = [...page.matchAll(/`(npm run fleet[^`]*)`/g)].map((m) => m[1]).concat(shellBlocks(page).map((b) => b.code));
    const flags = new Set(commands.flatMap((c) => flagsFor(c, 'npm run fleet')));
    expect(flags.size).toBeGreaterThan(0);
    for (const flag of flags) expect(fleet.usage, flag).toContain(`${flag} `);
  });
});
