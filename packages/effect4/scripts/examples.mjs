// Extracts every ```ts example of the public modules' JSDoc (src/**/*.ts but the core and internal/), of the README and
// of the Effect 4 blocks of the repository's README.md and docs/ (below) into .examples/ (git-ignored), one file per
// example, for `tsc -p tsconfig.examples.json` to type-check: an example that does not compile fails `npm run check`. The examples import the library as users do, `effect-resilience` and
// its entry points (`effect-resilience/RateLimiterStore/Redis`), mapped to src/ by tsconfig.json's paths.
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
/** Writes the ```ts blocks of `lines` (a doc comment's, or the README's) as examples named after `name`. */
const extract = (name, lines) => {
  let example
  for (const line of lines) {
    if (example === undefined && line.trim() === "```ts") example = []
    else if (example !== undefined && line.trim() === "```") {
      count++
      writeFileSync(join(out, `${name}.${count}.ts`), `export {}\n${example.join("\n")}\n`)
      example = undefined
    } else if (example !== undefined) example.push(line)
  }
}
for (const path of modules(src)) {
  const text = readFileSync(path, "utf8")
  for (const comment of text.match(/\/\*\*[\s\S]*?\*\//g) ?? []) {
    extract(basename(path, ".ts"), comment.split("\n").map((line) => line.replace(/^\s*\* ?/, "")))
  }
}
extract("README", readFileSync(join(pkg, "README.md"), "utf8").split("\n"))
// the repository's README.md and docs/: the blocks marked as Effect 4 code (`<!-- edition: effect4 -->`) or as code
// of both editions (`<!-- edition: both -->`); the root's check-docs.mjs checks the others against the Effect 3 edition
const repo = join(pkg, "../..")
for (
  const doc of [
    "README.md",
    ...readdirSync(join(repo, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)
  ]
) {
  const text = readFileSync(join(repo, doc), "utf8")
  for (const [, body] of text.matchAll(/^<!-- edition: (?:effect4|both)\b[^\n]*-->\n```ts\n([\s\S]*?)^```/gm)) {
    extract(`repo-${basename(doc, ".md")}`, ["```ts", ...body.split("\n"), "```"])
  }
}
if (count === 0) {
  console.error("scripts/examples.mjs: no examples found")
  process.exit(1)
}
console.log(`${count} examples extracted to .examples/`)
