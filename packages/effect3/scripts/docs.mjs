// Type-checks the Effect 3 code of the documentation against this edition: the repository's page for Effect 3
// (docs/effect3.md) and this package's README.md. The other guides and the repository's README are Effect 4 code,
// which packages/effect4/scripts/examples.mjs checks against that edition. Each ```ts block becomes a module of its
// own in .docs-check/ (git-ignored) and is compiled with this package's tsconfig, importing "effect-resilience" from
// src/. Exits non-zero when a block does not compile, or when a block marked as a copy of a test file
// (`<!-- the block below is packages/effect3/test/… (importing "…") -->`) differs from that file.
import { execFileSync } from "node:child_process"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { basename, join } from "node:path"

const pkg = new URL("..", import.meta.url).pathname
const root = join(pkg, "../..")
const out = join(pkg, ".docs-check")
rmSync(out, { recursive: true, force: true })
mkdirSync(out)

const sources = ["docs/effect3.md", "packages/effect3/README.md"]
const files = []
const problems = []
for (const source of sources) {
  const text = readFileSync(join(root, source), "utf8")
  const fence = /^```ts\n([\s\S]*?)^```/gm
  let match
  let i = 0
  while ((match = fence.exec(text)) !== null) {
    const line = text.slice(0, match.index).split("\n").length
    // a block that is a test file, shown as a user writes it: the test runs it, so the two must stay equal
    const mirror = /<!-- the block below is (\S+) \(importing "([^"]+)"\)[^\n]*-->\n$/.exec(text.slice(0, match.index))
    if (mirror !== null) {
      if (!mirror[1].startsWith("packages/effect3/test/")) {
        problems.push(`${source}:${line} mirrors ${mirror[1]}, which is not a test of this edition`)
        continue
      }
      const test = readFileSync(join(root, mirror[1]), "utf8").replaceAll(
        `from "${mirror[2]}"`,
        "from \"effect-resilience\""
      )
      if (test !== match[1]) problems.push(`${source}:${line} differs from ${mirror[1]}`)
    }
    const name = `${basename(source, ".md")}-${++i}.ts`
    // a leading comment maps compiler errors back to the markdown
    writeFileSync(
      join(out, name),
      `// ${source}:${line}\n${match[1].includes("import ") ? "" : "export {}\n"}${match[1]}`
    )
    files.push(name)
  }
}
writeFileSync(
  join(out, "tsconfig.json"),
  JSON.stringify({ extends: "../tsconfig.json", compilerOptions: { noUnusedLocals: false }, files, include: [] })
)
if (problems.length > 0) {
  for (const p of problems) console.error(p)
  process.exit(1)
}
console.log(`type-checking ${files.length} code blocks from ${sources.length} markdown files`)
try {
  execFileSync(join(pkg, "node_modules/.bin/tsc"), ["--noEmit", "-p", out], { stdio: "inherit" })
} catch {
  console.error("a documentation example does not compile (the first line of each file names its source)")
  process.exit(1)
}
