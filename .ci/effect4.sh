#!/usr/bin/env bash
# The Effect 4 edition's checks and tests (packages/effect4), from the repository root, on any machine. The edition
# needs Node >= 22.19 (vitest 5, @effect/platform-node 4): the node on PATH is used when it is new enough, else
# Node 22 from npm's `node` package, installed once into .tools/ (git-ignored). `npm run test:effect4` runs this;
# .ci/run will too. Its own node_modules and lock file are the edition's: the root's toolchain is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."

new_enough() {
  "$1" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)'
}

if command -v node >/dev/null 2>&1 && new_enough node; then
  node_bin="$(dirname "$(command -v node)")"
else
  if ! { [ -x .tools/node_modules/.bin/node ] && new_enough .tools/node_modules/.bin/node; }; then
    echo "effect4: Node $(node --version 2>/dev/null || echo '(none)') is older than 22.19; installing node@22 into .tools/"
    mkdir -p .tools
    # the node package fetches its platform's binary package in an install script: allow that one, by name
    [ -f .tools/package.json ] || echo '{ "private": true, "allowScripts": { "node": true } }' > .tools/package.json
    npm install --prefix .tools --no-audit --no-fund --no-save node@22
  fi
  node_bin="$PWD/.tools/node_modules/.bin"
fi
export PATH="$node_bin:$PATH"
echo "effect4: Node $(node --version)"

cd packages/effect4
npm ci --no-audit --no-fund
npm run check
npm test
# the tests ran over a copy of the one core: prove it is still that core, byte for byte
node scripts/core.mjs --check
