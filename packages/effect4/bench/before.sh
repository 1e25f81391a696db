#!/usr/bin/env bash
# Builds this edition's src/ at another commit (default: the last before issue 33's telemetry) into
# .before/<commit>/dist, for `npm run bench -- --only telemetry --before <that dist>`: the telemetry suite then
# measures that build's pipeline in the same run. Type errors of the old sources against today's core are
# reported and ignored (the emitted JavaScript is what is measured). Prints the dist's path.
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse --short "${1:-dfe94eb}")
out=.before/$commit
rm -rf "$out" && mkdir -p "$out"
git archive "$commit" src | tar -x -C "$out"
cat > "$out/tsconfig.json" <<JSON
{
  "extends": "../../tsconfig.build.json",
  "compilerOptions": {
    "rootDir": "src", "outDir": "dist", "declaration": false, "declarationMap": false, "sourceMap": false,
    "noEmitOnError": false
  },
  "include": ["src"]
}
JSON
npx tsc -p "$out/tsconfig.json" >&2 || true
echo "$PWD/$out/dist"
