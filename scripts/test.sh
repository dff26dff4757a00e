#!/usr/bin/env bash
# The test command: lint, typecheck, then every test against a real PostgreSQL and Redis. PostgreSQL is
# TEST_ADMIN_DATABASE_URL's, else the one at 127.0.0.1:5432, else one the tests start themselves (test/global-setup.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(bash scripts/node24.sh):$PATH"
redis-cli -u "${REDIS_URL:-redis://127.0.0.1:6379}" ping >/dev/null 2>&1 || { echo "Redis does not answer at ${REDIS_URL:-redis://127.0.0.1:6379}: start it (redis-server --daemonize yes)"; exit 1; }
npx eslint src test bench "scripts/**/*.ts" console/src
# the layers of src/ (.dependency-cruiser.cjs, docs/architecture.md)
npx depcruise src --config .dependency-cruiser.cjs
# one format (.prettierrc.json; npm run format applies it)
npx prettier --check --log-level warn "{src,test,bench}/**/*.ts" "scripts/**/*.{ts,mjs}" "console/src/**/*.{ts,tsx}"
npx tsc --noEmit
npx tsc -p console
# the console the browser tests drive (test/console/), built when a source changed
node scripts/build-console.mjs
npx vitest run "$@"  # both projects, unit and system (vitest.config.ts); per-file durations into test-results/durations.json
