// `npm start`: runs the service on Node.js 24 (installed from the npm registry into .tools/ when
// the machine's Node is older), with embedded defaults: its own PostgreSQL in ./data, a private Redis if none answers.
// package.json runs it with `exec`: npm passes SIGTERM/SIGINT on to its script's shell only, and a shell that stays
// between would die without passing them on, leaving the service running.
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildConsole } from './build-console.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let node = process.execPath;
if (Number(process.versions.node.split('.')[0]) < 24) {
  node = path.join(execFileSync('bash', [path.join(root, 'scripts/node24.sh')], { encoding: 'utf8' }).trim(), 'node');
}
// the browser console, built when a source changed since the last build (scripts/build-console.mjs); the API
// serves without it when the build fails, and says so at /
if (process.argv[2] !== 'admin') {
  try {
    buildConsole({ node });
  } catch (err) {
    console.error(`console: the build failed (${err.message}); the API runs without the console`);
  }
}
const child = spawn(node, ['--disable-warning=ExperimentalWarning', path.join(root, 'src/main.ts'), ...process.argv.slice(2)], { stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
