// The layers of src/ (.dependency-cruiser.cjs, docs/architecture.md): the tree keeps them, and an import against
// them is refused, by the same command `npm run lint` runs.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DEPCRUISE = path.join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruiser.mjs');
const run = promisify(execFile);

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** depcruise over `dir`'s src/ with the project's rules: the violations it reports. */
async function cruise(dir: string): Promise<Violation[]> {
  const out = await run(process.execPath, [DEPCRUISE, 'src', '--config', path.join(ROOT, '.dependency-cruiser.cjs'), '--output-type', 'json'], {
    cwd: dir,
    maxBuffer: 1 << 28,
  }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
  return (JSON.parse(out.stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

const temps: string[] = [];
afterAll(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

/** A scratch project: the project's tsconfig and the given files under src/. */
function scratch(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'layers-'));
  temps.push(dir);
  cpSync(path.join(ROOT, 'tsconfig.json'), path.join(dir, 'tsconfig.json'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

describe('the layers', () => {
  it('src/ keeps them: no import up the layers, no loop', async () => {
    expect(await cruise(ROOT)).toEqual([]);
  }, 120_000);

  it('refuses an import up the layers, a protocol library taking a value of the kernel, a loop and an unplaced folder', async () => {
    const dir = scratch({
      'src/app/logger.ts': 'export interface Logger { info(m: string): void }\nexport const silent = 1;\n',
      'src/gateway/listener.ts': 'export const listener = 1;\n',
      // a protocol library reaching up into a runtime
      'src/dtls/server.ts': "import { listener } from '../gateway/listener.ts';\nexport const server = listener;\n",
      // a type of the kernel is fine; a value is not
      'src/coap/endpoint.ts': "import type { Logger } from '../app/logger.ts';\nexport const log = (l: Logger) => l;\n",
      'src/coap/udp.ts': "import { silent } from '../app/logger.ts';\nexport const udp = silent;\n",
      // a feature importing a runtime, and two features in a loop
      'src/monitoring/a.ts': "import { b } from './b.ts';\nexport const a = () => b;\n",
      'src/monitoring/b.ts': "import { a } from './a.ts';\nimport { listener } from '../gateway/listener.ts';\nexport const b = () => [a, listener];\n",
      'src/newthing/x.ts': "import { silent } from '../app/logger.ts';\nexport const x = silent;\n",
      // the composition root may import anything; nothing imports it
      'src/service.ts': "import { listener } from './gateway/listener.ts';\nexport const service = listener;\n",
      'src/api/app.ts': "import { service } from '../service.ts';\nexport const app = service;\n",
    });
    const found = (await cruise(dir)).map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`).sort();
    expect(found).toEqual([
      'layer-api: src/api/app.ts -> src/service.ts',
      'layer-dtls: src/dtls/server.ts -> src/gateway/listener.ts',
      'layer-monitoring: src/monitoring/b.ts -> src/gateway/listener.ts',
      'no-circular: src/monitoring/a.ts -> src/monitoring/b.ts',
      'protocol-kernel-types-only: src/coap/udp.ts -> src/app/logger.ts',
      'unplaced-folder: src/newthing/x.ts -> src/app/logger.ts',
    ]);
  }, 120_000);
});
