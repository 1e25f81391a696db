#!/usr/bin/env bash
# Runs a command in one package of the repository, from the root, on any machine:
#
#   bash .ci/package.sh <package> install   npm ci in packages/<package> (the root's `npm ci` runs it for each)
#   bash .ci/package.sh <package> check     its own checks (below)
#   bash .ci/package.sh <package> test      its whole suite
#   bash .ci/package.sh <package> <script>  any other npm script of the package (bench, demo, serve, docs, ...)
#
# <package> is core, effect4 or effect3. Each has its own node_modules and lock file: npm cannot install the
# editions as workspaces of one tree (their peers conflict: effect 4 and effect 3, vitest 5 and vitest 3), so the
# root's `npm ci` installs each in turn (its postinstall), and `check`, `test` and the scripts install a package
# first when its node_modules is missing or older than its lock file.
#
# The Effect 4 edition needs Node >= 22.19 (vitest 5, @effect/platform-node 4): the node on PATH is used when it is
# new enough, else Node 22 from npm's `node` package, installed once into .tools/ (git-ignored). The core and the
# Effect 3 edition run on the node on PATH (20 or newer).
#
# check: core — tsc over its sources, tests and vectors. effect4 — tsc and the documentation's examples
# (scripts/examples.mjs), docs/api/ up to date, and its packed tarball in a fresh project (scripts/package.mjs).
# effect3 — the same for the LTS edition. EFFECT_RESILIENCE_OFFLINE=1 skips the registry installs of the
# package checks.
set -euo pipefail
# where the command was typed (npm run sets INIT_CWD): examples resolve the paths they are given against it
export EFFECT_RESILIENCE_CWD="${EFFECT_RESILIENCE_CWD:-${INIT_CWD:-$PWD}}"
cd "$(dirname "$0")/.."
package="${1:?usage: bash .ci/package.sh <core|effect4|effect3> <command> [args]}"
command="${2:-test}"
[ -d "packages/$package" ] || { echo ".ci/package.sh: no package packages/$package" >&2; exit 2; }

new_enough() {
  "$1" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)'
}

if [ "$package" = effect4 ]; then
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
fi

cd "packages/$package"
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
    if [ "$package" != core ]; then
      # its API reference (docs/api/, committed) is what its JSDoc generates
      node ../../.ci/docgen.mjs --check "packages/$package"
      # the packed edition in a fresh project: its install lines, example and entry points
      node scripts/package.mjs
    fi
    ;;
  test)
    installed || install
    echo "$package: Node $(node --version)"
    npm test
    ;;
  *)
    installed || install
    # exec: a signal sent to this script (npm forwards Ctrl-C and SIGTERM) reaches the script's process itself
    exec npm run -s "$command" -- "${@:3}"
    ;;
esac
