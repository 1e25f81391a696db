// Extracts every ```ts example of the public modules' JSDoc (src/**/*.ts but the core and internal/) into .examples/
// (git-ignored), one file per example, for `tsc -p tsconfig.examples.json` to type-check: an example that does not
// compile fails `npm run check`. The examples import the library as users do, `effect-resilience` and its entry
// points (`effect-resilience/IdempotencyStore/Sql`), mapped to src/ by tsconfig.json's paths.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"

const pkg = fileURLToPath(new URL("..", import.meta.url))
const src = join(pkg, "src")
const out = join(pkg, ".examples")
rmSync(out, { recursive: true, force: true })
mkdirSync(out)

/** The public modules: every .ts under src/ except the generated core and the internals. */
const modules = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? (entry.name === "core" || entry.name === "internal" ? [] : modules(join(dir, entry.name)))
      : entry.name.endsWith(".ts")
      ? [join(dir, entry.name)]
      : []
  )

let count = 0
for (const path of modules(src)) {
  const file = basename(path)
  const text = readFileSync(path, "utf8")
  for (const comment of text.match(/\/\*\*[\s\S]*?\*\//g) ?? []) {
    const lines = comment.split("\n").map((line) => line.replace(/^\s*\* ?/, ""))
    let example
    for (const line of lines) {
      if (example === undefined && line.trim() === "```ts") example = []
      else if (example !== undefined && line.trim() === "```") {
        count++
        writeFileSync(join(out, `${basename(file, ".ts")}.${count}.ts`), `export {}\n${example.join("\n")}\n`)
        example = undefined
      } else if (example !== undefined) example.push(line)
    }
  }
}
if (count === 0) {
  console.error("scripts/examples.mjs: no examples found")
  process.exit(1)
}
console.log(`${count} examples extracted to .examples/`)
