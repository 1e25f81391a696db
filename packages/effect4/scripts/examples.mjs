// Extracts every ```ts example of the public modules' JSDoc (src/**/*.ts but the core and internal/), of the README and
// of the repository's README.md and docs/ but its Effect 3 page (below) into .examples/ (git-ignored), one file per
// example, for `tsc -p tsconfig.examples.json` to type-check: an example that does not compile fails `npm run check`.
// The examples import the library as users do, `effect-resilience` and its entry points
// (`effect-resilience/RateLimiterStore/Redis`), mapped to src/ by tsconfig.json's paths.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"
import { fileURLToPath } from "node:url"
import { exampleRun, fencedBlocks, installLines } from "./readme.mjs"

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
// the repository's README.md and docs/: every block, but the page about the Effect 3 edition (docs/effect3.md, which
// packages/effect3/scripts/docs.mjs checks against that edition). A block marked as a copy of a test file
// (`<!-- the block below is packages/effect4/test/… (importing "…") -->`) must equal that file, importing the library
// as "effect-resilience"; tsconfig.json type-checks the test (its include has test/) and the suite runs it.
const repo = join(pkg, "../..")
const effect3Page = "docs/effect3.md"
const mismatches = []
for (
  const doc of [
    "README.md",
    ...readdirSync(join(repo, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)
  ]
) {
  if (doc === effect3Page) continue
  const text = readFileSync(join(repo, doc), "utf8")
  for (const match of text.matchAll(/^```ts\n([\s\S]*?)^```/gm)) {
    const line = text.slice(0, match.index).split("\n").length
    const mirror = /<!-- the block below is (\S+) \(importing "([^"]+)"\)[^\n]*-->\n$/.exec(text.slice(0, match.index))
    if (mirror === null) {
      extract(`repo-${basename(doc, ".md")}`, ["```ts", ...match[1].split("\n"), "```"])
    } else if (!mirror[1].startsWith("packages/effect4/test/")) {
      mismatches.push(`${doc}:${line} mirrors ${mirror[1]}, which is not a test of this edition`)
    } else {
      const test = readFileSync(join(repo, mirror[1]), "utf8").replaceAll(
        `from "${mirror[2]}"`,
        "from \"effect-resilience\""
      )
      if (test !== match[1]) mismatches.push(`${doc}:${line} differs from ${mirror[1]}`)
    }
  }
}
// This README is what npm shows, but scripts/package.mjs runs the example and installs the lines of the repository's
// README: the two must show the same example, run the same way, and the same install lines.
const ours = readFileSync(join(pkg, "README.md"), "utf8")
const theirs = readFileSync(join(repo, "README.md"), "utf8")
const [oursBlocks, theirsBlocks] = [fencedBlocks(ours), fencedBlocks(theirs)]
if (oursBlocks.find(([, lang]) => lang === "ts")?.[2] !== theirsBlocks.find(([, lang]) => lang === "ts")?.[2]) {
  mismatches.push("packages/effect4/README.md: its first ```ts block is not the example of the repository's README.md")
}
const [oursRun, theirsRun] = [exampleRun(ours), exampleRun(theirs)]
if (theirsRun === undefined) {
  mismatches.push("README.md: no \"save it as `<file>` and run `node <file>`\" … \"prints `<output>`\" for the example")
} else if (JSON.stringify(oursRun) !== JSON.stringify(theirsRun)) {
  mismatches.push(
    `packages/effect4/README.md: the example is not run as the repository's README.md says (${
      JSON.stringify(oursRun)
    } against ${JSON.stringify(theirsRun)})`
  )
}
const [oursLines, reposLines] = [installLines(oursBlocks), installLines(theirsBlocks)]
for (const line of oursLines) {
  if (!reposLines.includes(line)) {
    mismatches.push(
      `packages/effect4/README.md: "${line}" is not an Effect 4 install line of the repository's README.md`
    )
  }
}
for (const line of reposLines) {
  if (!oursLines.includes(line)) {
    mismatches.push(`packages/effect4/README.md: it lacks the repository README.md's Effect 4 install line "${line}"`)
  }
}
if (mismatches.length > 0) {
  for (const m of mismatches) console.error(`scripts/examples.mjs: ${m}`)
  process.exit(1)
}
if (count === 0) {
  console.error("scripts/examples.mjs: no examples found")
  process.exit(1)
}
console.log(`${count} examples extracted to .examples/`)
