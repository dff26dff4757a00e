#!/usr/bin/env bash
# The test command: lint, typecheck, then every test against the real PostgreSQL and Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(bash scripts/node24.sh):$PATH"
redis-cli -u "${REDIS_URL:-redis://127.0.0.1:6379}" ping >/dev/null 2>&1 || { echo "Redis does not answer at ${REDIS_URL:-redis://127.0.0.1:6379}: start it (redis-server --daemonize yes)"; exit 1; }
pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1 || [ -n "${TEST_ADMIN_DATABASE_URL:-}" ] || { echo "PostgreSQL does not answer at 127.0.0.1:5432: start it, or set TEST_ADMIN_DATABASE_URL"; exit 1; }
npx eslint src test bench
npx tsc --noEmit
npx vitest run "$@"
