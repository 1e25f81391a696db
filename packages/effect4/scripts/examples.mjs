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
// This README is what npm shows, but scripts/package.mjs runs the example and installs the lines of the repository's
// README (its `<!-- edition: effect4 -->` blocks): the two must show the same example and the same install lines.
const anyBlock = /^```(\w+)\n([\s\S]*?)^```/gm
const effect4Block = /^<!-- edition: effect4\b[^\n]*-->\n```(\w+)\n([\s\S]*?)^```/gm
const blocks = (text, pattern) => [...text.matchAll(pattern)]
const installLines = (found) =>
  found.filter(([, lang]) => lang === "sh").flatMap(([, , body]) =>
    body.split("\n").map((line) => line.replace(/#.*$/, "").trim()).filter((line) => /^npm (i|install) /.test(line))
  )
const ours = blocks(readFileSync(join(pkg, "README.md"), "utf8"), anyBlock)
const repos = blocks(readFileSync(join(repo, "README.md"), "utf8"), effect4Block)
const mismatches = []
if (ours.find(([, lang]) => lang === "ts")?.[2] !== repos.find(([, lang]) => lang === "ts")?.[2]) {
  mismatches.push("its first ```ts block is not the Effect 4 example of the repository's README.md")
}
const [oursLines, reposLines] = [installLines(ours), installLines(repos)]
for (const line of oursLines) {
  if (!reposLines.includes(line)) {
    mismatches.push(`"${line}" is not an Effect 4 install line of the repository's README.md`)
  }
}
for (const line of reposLines) {
  if (!oursLines.includes(line)) mismatches.push(`it lacks the repository README.md's Effect 4 install line "${line}"`)
}
if (mismatches.length > 0) {
  for (const m of mismatches) console.error(`scripts/examples.mjs: packages/effect4/README.md: ${m}`)
  process.exit(1)
}
if (count === 0) {
  console.error("scripts/examples.mjs: no examples found")
  process.exit(1)
}
console.log(`${count} examples extracted to .examples/`)
