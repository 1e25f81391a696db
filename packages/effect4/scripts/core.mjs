// The Effect 4 edition compiles the one pure core, which lives outside this package: the repository's src/core
// today, packages/core/src once the repository is split into workspaces. Its source imports `./core/*.js`
// relatively, as the Effect 3 edition's does, so this script copies the core into src/core (git-ignored, files
// read-only so an edit there is noticed), and the tarball is self-contained with no version skew.
//
//   node scripts/core.mjs           copy what changed (run before build, check, test and bench)
//   node scripts/core.mjs --check   exit 1 unless src/core is byte for byte the one core (CI, prepack)
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const pkg = fileURLToPath(new URL("..", import.meta.url))
const candidates = [join(pkg, "..", "core", "src"), join(pkg, "..", "..", "src", "core")]
const source = candidates.find((dir) => existsSync(dir))
if (source === undefined) {
  console.error(`scripts/core.mjs: the core was found in none of ${candidates.join(", ")}`)
  process.exit(1)
}
const target = join(pkg, "src", "core")

const files = (dir) =>
  !existsSync(dir) ? [] : readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? files(join(dir, entry.name)).map((f) => join(entry.name, f))
      : entry.name.endsWith(".ts")
      ? [entry.name]
      : []
  )

const wanted = new Map(files(source).map((f) => [f, readFileSync(join(source, f))]))
const present = new Map(files(target).map((f) => [f, readFileSync(join(target, f))]))
const stale = [...present.keys()].filter((f) => !wanted.has(f))
const changed = [...wanted.keys()].filter((f) => !present.has(f) || !present.get(f).equals(wanted.get(f)))

if (process.argv.includes("--check")) {
  if (stale.length + changed.length > 0) {
    console.error(`src/core is not the core in ${relative(pkg, source)}:`)
    for (const f of changed) console.error(`  ${present.has(f) ? "differs" : "missing"}: ${f}`)
    for (const f of stale) console.error(`  not in the core: ${f}`)
    console.error("run `node scripts/core.mjs`, and make core changes in the one core, never in the copy")
    process.exit(1)
  }
  console.log(`src/core is the core in ${relative(pkg, source)} (${wanted.size} files)`)
} else {
  for (const f of stale) rmSync(join(target, f), { force: true })
  for (const f of changed) {
    const to = join(target, f)
    mkdirSync(dirname(to), { recursive: true })
    rmSync(to, { force: true })
    writeFileSync(to, wanted.get(f))
    chmodSync(to, 0o444)
  }
}
