// The API reference: @effect/docgen reads the JSDoc of the public modules (docgen.json) and writes one page per
// module into docs/api/modules/, with docs/api/README.md as the index.
//
//   node .ci/docgen.mjs <dir>            (npm run docs)   writes <dir>/docs/api/
//   node .ci/docgen.mjs --check <dir>    (npm run check)  writes nothing; fails when docgen fails or docs/api/ is stale
//
// <dir> is an edition's package, packages/effect4 or packages/effect3, with its own docgen.json, tsconfig.json and
// node_modules: its examples are compiled against its own effect.
//
// docgen fails when an export has no `@since` or a JSDoc `@example` does not compile: it writes every example to
// a file and runs `tsc` on them with the project's compiler options (tsconfig.json, so `effect-resilience/...`
// imports resolve to src/ through `paths`, as a user's resolve to dist/). This script adds that every export
// has a `@category` and that the pages are exactly the package's entry points (package.json `exports`).
//
// docgen is not run in the repository itself, for two reasons, so it runs in .docgen/ (git-ignored), with `src`
// linked in and the output copied back:
// - it rewrites `from "<package name>/X"` in examples to `from "../../src/X"`, which misses NodeNext's file
//   extensions; under another
//   package name it leaves the imports alone and `paths` resolves them.
// - after `tsc` it runs the examples with `tsx`. Ours are fragments that type-check but do not run (they
//   `declare` the caller's effects, and some start a server or need Redis or PostgreSQL), so a `tsx` that does
//   nothing is first on docgen's PATH: the examples are type-checked, not run.
//
// src/index.ts gets no page (every `export * as X` there would be a one-line re-export, and docgen gives the
// first one the module's comment); the index says which modules the root re-exports. The pages are read on
// GitHub and in the npm package, not served by Jekyll: docgen's _config.yml and index.md are dropped and each
// page's front matter becomes a title. package.json pins docgen's prettier to 3.8: later ones no longer see
// that front matter (docgen writes a blank line before it) and turn it into text.
import { execFileSync } from "node:child_process"
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { delimiter, dirname, join, relative, resolve } from "node:path"

const repo = new URL("..", import.meta.url).pathname
const args = process.argv.slice(2)
const check = args.includes("--check")
const dir = args.find((a) => a !== "--check")
if (dir === undefined) {
  console.error("usage: node .ci/docgen.mjs [--check] <package dir>")
  process.exit(2)
}
const root = resolve(repo, dir)
const read = (file) => readFileSync(join(root, file), "utf8")
const config = JSON.parse(read("docgen.json"))
const pkg = JSON.parse(read("package.json"))

const work = join(root, ".docgen")
rmSync(work, { recursive: true, force: true })
mkdirSync(join(work, "bin"), { recursive: true })
symlinkSync(join(root, config.srcDir), join(work, config.srcDir), "dir")
writeFileSync(
  join(work, "package.json"),
  JSON.stringify({ name: `${pkg.name}-api`, homepage: "", type: "module", private: true })
)
writeFileSync(join(work, "bin", "tsx"), "#!/bin/sh\n# docgen's examples are type-checked only (see .ci/docgen.mjs)\n")
chmodSync(join(work, "bin", "tsx"), 0o755)

// examples: the project's compiler options, with `paths` made absolute (docgen writes the examples' tsconfig
// in its output folder); fragments may leave names unused, as in check-docs.mjs
const options = typeof config.examplesCompilerOptions === "string"
  ? JSON.parse(read(config.examplesCompilerOptions)).compilerOptions
  : config.examplesCompilerOptions ?? {}
const paths = Object.fromEntries(
  Object.entries(options.paths ?? {}).map(([name, targets]) => [name, targets.map((t) => join(root, t))])
)
writeFileSync(
  join(work, "docgen.json"),
  JSON.stringify({
    ...config,
    outDir: "out",
    examplesCompilerOptions: { ...options, paths, noEmit: true, noUnusedLocals: false, noUnusedParameters: false },
    // the signatures are read with the same `paths`: a type from the core (@effect-resilience/core/*) is named,
    // not `any`
    parseCompilerOptions: { ...options, paths }
  })
)

try {
  execFileSync(process.execPath, [join(repo, "node_modules/@effect/docgen/bin.cjs")], {
    cwd: work,
    stdio: "inherit",
    env: {
      ...process.env,
      // the package's own tsc first: it compiles the examples against the package's effect
      PATH: [join(work, "bin"), join(root, "node_modules/.bin"), join(repo, "node_modules/.bin"), process.env.PATH]
        .join(delimiter)
    }
  })
} catch {
  console.error("docgen failed (above): an export without @since, or an @example that does not compile")
  process.exit(1)
}

// the pages are the entry points: package.json's `exports`, whose sources tsconfig.json's `paths` name
const sources = JSON.parse(read("tsconfig.json")).compilerOptions.paths
const entries = Object.entries(sources)
  .map(([specifier, [source]]) => ({ specifier, page: source.replace(/^\.\/src\//, "modules/") + ".md" }))
  // the entry points, not the package itself nor the core it bundles (`@effect-resilience/core/*`)
  .filter((entry) => entry.specifier.startsWith(`${pkg.name}/`))

const failures = []
const pages = new Map()
const modules = join(work, "out", "modules")
for (const file of walk(modules).filter((f) => f.endsWith(".ts.md"))) {
  const page = `modules/${relative(modules, file)}`
  const entry = entries.find((e) => e.page === page)
  if (entry === undefined) failures.push(`${page} is not a package entry point; see docgen.json`)
  const text = readFileSync(file, "utf8")
    // Jekyll's front matter (GitHub shows it as a table) becomes a title: the import specifier
    .replace(/^---\n[\s\S]*?\n---\n/, `# ${entry?.specifier ?? page}\n`)
    // docgen copies `{@link X}` as written, which GitHub would show with its braces: make it `X`
    .replace(
      /(^```[\s\S]*?^```$)|\{@link\s+([^}|\s]+)\s*(?:\|\s*([^}]+?)\s*)?\}/gm,
      (_match, code, target, label) => code ?? `\`${label ?? target}\``
    )
  // docgen files an export without a @category under "utils"
  if (/^# utils$/m.test(text)) failures.push(`${page}: exports without @category (under "utils")`)
  pages.set(page, text)
}
for (const entry of entries) {
  if (!pages.has(entry.page)) failures.push(`${entry.specifier} has no page (${entry.page}); see docgen.json`)
}
if (failures.length > 0) {
  for (const f of failures) console.error(`docgen: ${f}`)
  process.exit(1)
}

const files = new Map([...pages, ["README.md", index(entries)]])
const out = join(root, config.outDir)
if (check) {
  const existing = walk(out).map((f) => relative(out, f))
  const stale = [
    ...[...files].filter(([file, text]) => !existing.includes(file) || readFileSync(join(out, file), "utf8") !== text)
      .map(([file]) => file),
    ...existing.filter((file) => !files.has(file))
  ]
  if (stale.length > 0) {
    console.error(`${relative(repo, out)} is stale (${stale.join(", ")}): run npm run docs`)
    process.exit(1)
  }
  console.log(`docgen: ${pages.size} module pages in ${relative(repo, out)} are up to date`)
} else {
  rmSync(out, { recursive: true, force: true })
  for (const [file, text] of files) {
    mkdirSync(dirname(join(out, file)), { recursive: true })
    writeFileSync(join(out, file), text)
  }
  console.log(`docgen: wrote ${pages.size} module pages and README.md to ${relative(repo, out)}`)
}
rmSync(work, { recursive: true, force: true })

/** The index: each entry point, how to import it, and the first sentence of its overview. */
function index(entries) {
  // the edition: its required peers, and where its guides are listed
  const optional = pkg.peerDependenciesMeta ?? {}
  const needs = Object.keys(pkg.peerDependencies ?? {}).filter((n) => optional[n]?.optional !== true)
    .sort((a, b) => a === "effect" ? -1 : b === "effect" ? 1 : a.localeCompare(b))
    .map((n) => `\`${n}\``).join(" and ")
  const effect = pkg.peerDependencies.effect
  const edition = `the Effect ${/\d+/.exec(effect)?.[0]} edition (\`effect\` ${effect})`
  const guides = /^\^?4/.test(effect)
    ? `This is the reference of ${edition}, the current one; its [README](../../README.md) introduces it.`
    : `This is the reference of ${edition}, the LTS line; its [README](../../README.md) says what that means.`
  const reexported = new Map(
    [...read("src/index.ts").matchAll(/^export \* as (\w+) from "\.\/(.+)\.js"$/gm)].map(([, name, path]) => [
      `modules/${path}.ts.md`,
      name
    ])
  )
  const rows = entries
    .sort((a, b) => a.specifier.localeCompare(b.specifier))
    .map(({ page, specifier }) => {
      const overview = /^## .* overview\n\n([\s\S]*?)\n\n/m.exec(pages.get(page))?.[1] ?? ""
      const summary = (/^[\s\S]*?(?<!\be\.g|\bi\.e)[.:](?=\s|$)/.exec(overview)?.[0] ?? overview)
        .replace(/\s+/g, " ")
        .replace(/:$/, ".")
        .replaceAll("|", "\\|")
      const name = reexported.get(page)
      const imports = `\`${specifier}\`${name === undefined ? "" : `, or \`${name}\` from the root`}`
      return `| [${specifier.slice(pkg.name.length + 1)}](${page}) | ${imports} | ${summary} |`
    })
  return [
    "# API reference",
    "",
    "One page per entry point of `effect-resilience`, generated from the JSDoc in `src/` by `npm run docs`",
    "([@effect/docgen](https://github.com/Effect-TS/docgen)). Do not edit these files: `npm run check` fails",
    "when they differ from what the sources generate.",
    guides,
    "",
    `The root, \`${pkg.name}\`, re-exports the modules that need only ${needs}, each as a`,
    "namespace; the backends that need an optional peer dependency are imported from their own entry points.",
    "",
    "| Module | Import | |",
    "| --- | --- | --- |",
    ...rows,
    ""
  ].join("\n")
}

function walk(dir) {
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true })
  } catch {
    return []
  }
  return entries.flatMap((e) => e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)])
}
