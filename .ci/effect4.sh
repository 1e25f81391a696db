#!/usr/bin/env bash
# Runs a command of the Effect 4 edition (packages/effect4) from the repository root, on any machine:
#
#   bash .ci/effect4.sh install   install its dependencies (npm ci in packages/effect4)
#   bash .ci/effect4.sh check     its type-check and examples, that its core is the root's, byte for byte, that
#                                 its docs/api/ is up to date, and its package in a fresh project
#                                 (scripts/package.mjs; EFFECT_RESILIENCE_OFFLINE=1 skips the registry installs)
#   bash .ci/effect4.sh docs      regenerate its API reference, packages/effect4/docs/api/ (root npm run docs does)
#   bash .ci/effect4.sh test      its whole suite (unit, then integration)
#   bash .ci/effect4.sh <script>  any other npm script of packages/effect4 (bench, bench:sqlite, demo, serve, ...)
#
# The edition needs Node >= 22.19 (vitest 5, @effect/platform-node 4): the node on PATH is used when it is new
# enough, else Node 22 from npm's `node` package, installed once into .tools/ (git-ignored). The edition has its own
# node_modules and lock file: npm cannot install it as a workspace of the root (its optional peers, such as
# @effect/platform-node 4, conflict with the root's Effect 3 packages: ERESOLVE), so the root's toolchain is not
# touched. `check` and `test` install the dependencies first when they are missing or older than the lock file.
set -euo pipefail
# where the command was typed (npm run sets INIT_CWD): examples resolve the paths they are given against it
export EFFECT_RESILIENCE_CWD="${EFFECT_RESILIENCE_CWD:-${INIT_CWD:-$PWD}}"
cd "$(dirname "$0")/.."
command="${1:-test}"

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

cd packages/effect4
install() {
  npm ci --no-audit --no-fund
  cp package-lock.json node_modules/.installed-lock.json
}
# installed when the lock file's tree is the one last installed (the package's own name and version aside: they change
# on a release and install nothing)
installed() {
  [ -f node_modules/.installed-lock.json ] && node -e '
    const { readFileSync } = require("node:fs")
    const tree = (file) => {
      const lock = JSON.parse(readFileSync(file, "utf8"))
      delete lock.name, delete lock.version, delete lock.packages[""].name, delete lock.packages[""].version
      return JSON.stringify(lock)
    }
    process.exit(tree("package-lock.json") === tree("node_modules/.installed-lock.json") ? 0 : 1)'
}

case "$command" in
  install) install ;;
  check)
    installed || install
    npm run -s check
    # the edition is tested over a copy of the one core: prove it is still that core
    node scripts/core.mjs --check
    # its API reference (docs/api/, committed) is what its JSDoc generates
    node ../../.ci/docgen.mjs --check packages/effect4
    # the packed edition in a fresh project: the README's Effect 4 install lines, example and entry points
    node scripts/package.mjs
    ;;
  test)
    installed || install
    echo "effect4: Node $(node --version)"
    npm test
    ;;
  *)
    installed || install
    # exec: a signal sent to this script (npm forwards Ctrl-C and SIGTERM) reaches the script's process itself
    exec npm run -s "$command" -- "${@:2}"
    ;;
esac
