// Checks the Effect 3 edition as a user gets it (run by `bash .ci/package.sh effect3 check`). `npm pack` (whose
// `prepack` builds the core and dist/) into a temporary directory outside the repository, then:
//
// - every `exports` entry's .js and .d.ts, LICENSE, and every file README.md and docs/ link to are in the tarball;
// - tsconfig.json's `paths` map exactly the `exports` subpaths to their sources (docs and examples import them);
// - the root entry and every entry that needs no optional peer type-check with `skipLibCheck: false` and load in
//   Node, with only `effect` and `@effect/platform` (and their own dependencies) in node_modules: a type or an
//   import that reaches `ioredis`, `@effect/sql` or `@effect/platform-node` fails here;
// - the backend entries type-check with their peers installed, so their declarations are whole too;
// - the manifest is this edition's identity: `effect-resilience` 0.x, published under the `effect3` dist-tag;
// - every `npm i` line of this edition's install instructions works as written: the lines of this package's README.md
//   and of the repository's page for Effect 3 (docs/effect3.md), and any line of the repository's README.md and
//   other guides that names `effect-resilience@effect3` (the others are the Effect 4 edition's, which
//   packages/effect4/scripts/package.mjs installs). It names the package `effect-resilience@effect3` and each
//   Effect package with a version (unversioned, npm takes the Effect 4 releases and fails with ERESOLVE), and, from
//   the registry, it installs in a fresh project (the tarball in place of `effect-resilience@effect3`) with one
//   copy of each Effect package, every entry point whose peers it installed loads in Node, and a line that installs
//   vitest runs an `it.effect` test.
//   Every backend entry must be loaded by some line. Install scripts are not run (better-sqlite3 would compile for
//   minutes): the packages load, the native SQLite binding is not built. EFFECT_RESILIENCE_OFFLINE=1 skips
//   this part (it needs the registry) and says so.
//
// Except for those installs, packages are symlinked from this package's node_modules (no network). The
// type-check reports what a user's `tsc` with `skipLibCheck: false` reports for the consumer and this package's
// declarations; it does not re-check effect's own declarations, which saves two thirds of the time. Exits
// non-zero on any failure.
import { execFile, execFileSync } from "node:child_process"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import {
  checkListing,
  closure,
  head,
  namedPackages,
  npmArgs,
  pack,
  specifier,
  versionsIn
} from "../../../.ci/tarball.mjs"

/** This package's folder (what is packed, its node_modules and tsconfig.json) and the repository's (the guides). */
const root = new URL("..", import.meta.url).pathname
const repo = join(root, "../..")
if (process.argv[2] === "--typecheck") process.exit(typecheck(process.argv[3]))
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))

/** The entries that import an optional peer, and the peers their users install. */
const backends = {
  "./CircuitBreaker/Redis": ["ioredis"],
  "./Consumer/Sql": ["@effect/sql"],
  "./IdempotencyStore/Redis": ["ioredis"],
  "./IdempotencyStore/Sql": ["@effect/sql"],
  "./Outbox": ["@effect/sql"],
  "./PgQueue": ["@effect/sql"],
  "./RateLimiterStore/Redis": ["ioredis"],
  "./RateLimiterStore/Sql": ["@effect/sql"],
  "./RedisStreamQueue": ["ioredis"],
  "./ResilientHttpClient/Node": ["@effect/platform-node"]
}
const required = ["effect", "@effect/platform"]

const failures = []
const fail = (message) => failures.push(message)

const entries = Object.entries(pkg.exports).filter(([name]) => name !== "./package.json")
// the editions share the npm name: the Effect 4 one (packages/effect4) is 1.x on `latest`, this one 0.x under the
// `effect3` dist-tag, so that publishing it never moves `latest` back to Effect 3 (see docs/effect3.md)
if (pkg.name !== "effect-resilience" || !/^0\./.test(pkg.version) || pkg.publishConfig?.tag !== "effect3") {
  fail(
    `package.json should be effect-resilience 0.x with publishConfig.tag "effect3", is ${pkg.name} ${pkg.version} ` +
      `with tag ${pkg.publishConfig?.tag}`
  )
}
for (const name of Object.keys(backends)) {
  if (pkg.exports[name] === undefined) fail(`exports has no "${name}"`)
}

// tsconfig paths: the same subpaths as exports, each to the source of its dist file
const paths = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8")).compilerOptions.paths
const expected = Object.fromEntries(
  entries.map((
    [name, target]
  ) => [specifier(name), [target.types.replace(/^\.\/dist\//, "./src/").replace(/\.d\.ts$/, ".ts")]])
)
for (const [name, targets] of Object.entries(expected)) {
  if (JSON.stringify(paths[name]) !== JSON.stringify(targets)) {
    fail(`tsconfig.json paths["${name}"] should be ${JSON.stringify(targets)}, is ${JSON.stringify(paths[name])}`)
  }
}
for (const name of Object.keys(paths)) {
  // the core's modules are the bundled @effect-resilience/core package, mapped to its sources for development;
  // #edition is the tests' adapter for the shared contract, #vectors the shared scenario vectors' format
  if (!(name in expected) && !["@effect-resilience/core/*", "#edition", "#vectors"].includes(name)) {
    fail(`tsconfig.json paths["${name}"] is not in package.json exports`)
  }
}

const work = mkdtempSync(join(tmpdir(), "effect-resilience-package-"))
try {
  const { tarball, listing } = pack(root, work)
  // relative links of the shipped markdown must resolve inside the tarball
  checkListing(root, listing, entries, fail)
  if (failures.length > 0) throw new Error("the tarball is incomplete")

  const consumers = [
    { dir: "plain", packages: required, entries: entries.map(([n]) => n).filter((n) => !(n in backends)) },
    {
      dir: "backends",
      // ioredis's declarations reference Node's types, so its users have @types/node
      packages: [...required, ...new Set(Object.values(backends).flat()), "@types/node"],
      entries: Object.keys(backends)
    }
  ]
  const run = promisify(execFile)
  const checks = consumers.map(async (consumer) => {
    const dir = join(work, consumer.dir)
    const modules = join(dir, "node_modules")
    mkdirSync(join(modules, "effect-resilience"), { recursive: true })
    execFileSync("tar", ["-xzf", tarball, "-C", join(modules, "effect-resilience"), "--strip-components=1"])
    for (const name of closure(join(root, "node_modules"), consumer.packages)) {
      mkdirSync(dirname(join(modules, name)), { recursive: true })
      symlinkSync(join(root, "node_modules", name), join(modules, name), "dir")
    }
    const imports = consumer.entries.map((entry, i) => `import * as M${i} from "${specifier(entry)}"\n`)
    writeFileSync(
      join(dir, "consumer.ts"),
      imports.join("") + `export const all: ReadonlyArray<object> = [${consumer.entries.map((_, i) => `M${i}`)}]\n`
    )
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          lib: ["ES2022", "DOM", "DOM.Iterable"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: consumer.packages.includes("@types/node") ? ["node"] : []
        },
        files: ["consumer.ts"]
      })
    )
    const installed = consumer.packages.join(", ")
    try {
      await run(process.execPath, [fileURLToPath(import.meta.url), "--typecheck", dir], { cwd: dir })
    } catch (error) {
      console.error(error.stdout)
      fail(`entries do not type-check with skipLibCheck: false and only ${installed} installed (${dir})`)
    }
    if (consumer.dir === "plain") {
      const script = consumer.entries.map((entry) => `await import(${JSON.stringify(specifier(entry))})`).join("\n")
      try {
        await run(process.execPath, ["--input-type=module", "-e", script], { cwd: dir })
      } catch (error) {
        console.error(error.stderr)
        fail(`entries do not load in Node with only ${installed} installed (${dir})`)
      }
    }
  })
  await Promise.all(checks)
  await checkInstallLines(tarball, entries.map(([n]) => n))
} catch (error) {
  fail(error instanceof Error ? error.message : String(error))
}

if (failures.length > 0) {
  for (const f of failures) console.error(`package check: ${f}`)
  console.error(`(left ${work} for inspection)`)
  process.exit(1)
}
rmSync(work, { recursive: true, force: true })
console.log(
  `package check: ${entries.length} entries packed; the root and ${
    entries.length - Object.keys(backends).length - 1
  } other entries need only ${required.join(" and ")}`
)

/** Type-checks the project in `dir`; reports the diagnostics of its own files and of effect-resilience's. */
function typecheck(dir) {
  const ts = createRequire(join(root, "package.json"))("typescript")
  const host = { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} }
  const config = ts.getParsedCommandLineOfConfigFile(join(dir, "tsconfig.json"), {}, host)
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options })
  const checked = program.getSourceFiles().filter((f) =>
    f.fileName.includes("/node_modules/effect-resilience/") || !f.fileName.includes("/node_modules/")
  )
  const diagnostics = [
    ...config.errors,
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...checked.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)])
  ]
  if (checked.filter((f) => f.fileName.includes("/effect-resilience/")).length === 0) {
    console.log("no declaration of effect-resilience was loaded")
    return 1
  }
  const format = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => dir, getNewLine: () => "\n" }
  if (diagnostics.length > 0) console.log(ts.formatDiagnostics(diagnostics, format))
  return diagnostics.length === 0 ? 0 : 1
}

/**
 * The `npm i` / `npm install` lines of this edition, each once, in order: every line of the ```sh blocks of
 * docs/effect3.md and this package's README.md, and the lines of the repository's README.md and other guides that
 * name `effect-resilience@effect3` (their other lines install the Effect 4 edition).
 */
function documentedInstallLines() {
  const guides = readdirSync(join(repo, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)
  const ours = new Set(["docs/effect3.md", "packages/effect3/README.md"])
  const sources = ["docs/effect3.md", "packages/effect3/README.md", "README.md", ...guides.filter((f) => !ours.has(f))]
  const lines = new Map()
  for (const source of sources) {
    for (const [, block] of readFileSync(join(repo, source), "utf8").matchAll(/^```sh\n([\s\S]*?)^```/gm)) {
      for (const line of block.split("\n")) {
        const command = line.replace(/#.*$/, "").trim()
        if (!/^npm (i|install) /.test(command) || lines.has(command)) continue
        if (ours.has(source) || isThisPackage(command)) lines.set(command, source)
      }
    }
  }
  return [...lines].map(([command, source]) => ({ command, source }))
}

/** Installs each documented line from the registry in a fresh project and loads what it is for (see the top). */
async function checkInstallLines(tarball, entryNames) {
  const lines = documentedInstallLines()
  const effectPackage = (name) => name === "effect" || name.startsWith("@effect/") || name === "vitest"
  for (const { command, source } of lines) {
    for (const arg of command.split(/\s+/).slice(2).filter((a) => !a.startsWith("-"))) {
      const name = arg.replace(/(.)@.*$/, "$1")
      if (effectPackage(name) && !/.@./.test(arg)) {
        fail(`${source}: "${command}" names ${name} without a version: npm would take the Effect 4 release`)
      }
    }
  }
  for (const { command, source } of lines) {
    if (command.split(/\s+/).includes("effect-resilience")) {
      fail(
        `${source}: "${command}" names effect-resilience without the effect3 tag: npm would take the Effect 4 edition`
      )
    }
  }
  if (!lines.some((l) => isThisPackage(l.command))) fail("docs/effect3.md and README.md give no install line")
  if (process.env["EFFECT_RESILIENCE_OFFLINE"] === "1") {
    console.log(`package check: EFFECT_RESILIENCE_OFFLINE=1, the ${lines.length} install lines were NOT installed`)
    return
  }
  const run = promisify(execFile)
  const npm = (dir, command) =>
    run("npm", npmArgs(command, "effect-resilience@effect3", tarball), { cwd: dir, maxBuffer: 16 << 20 })
  const bases = lines.filter((l) => isThisPackage(l.command))
  // a line without the package adds to a project that has it: the first (core) line's
  const additions = lines.filter((l) => !bases.includes(l))
  const loaded = new Set()
  const started = Date.now()
  const failedBefore = failures.length
  const checkLine = async ({ command, source }, i, before = []) => {
    const dir = join(dirname(tarball), `install-${i}`)
    mkdirSync(dir)
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `install-${i}`, private: true, type: "module" }))
    const what = `${source}: "${command}"`
    try {
      for (const c of [...before, command]) await npm(dir, c)
    } catch (error) {
      return fail(`${what} does not install:\n${head(error.stderr ?? error, 12)}`)
    }
    const has = (name) => existsSync(join(dir, "node_modules", name, "package.json"))
    // npm ls exits non-zero for a missing optional peer, but its JSON is the tree all the same
    const listed = await run("npm", ["ls", "--all", "--json"], { cwd: dir, maxBuffer: 64 << 20 }).catch((e) => e)
    for (const [name, versions] of versionsIn(JSON.parse(listed.stdout))) {
      if ((effectPackage(name) || name === "effect-resilience") && versions.size > 1) {
        fail(`${what} installs ${versions.size} copies of ${name} (${[...versions].join(", ")})`)
      }
    }
    const usable = entryNames.filter((e) => (backends[e] ?? []).every(has))
    const named = namedPackages(command)
    const imports = [
      ...usable.map(specifier),
      ...named.filter((n) => n !== "effect-resilience" && n !== "vitest" && n !== "@effect/vitest")
    ]
    try {
      const script = imports.map((m) => `await import(${JSON.stringify(m)})`).join("\n")
      await run(process.execPath, ["--input-type=module", "-e", script], { cwd: dir })
      usable.forEach((e) => loaded.add(e))
    } catch (error) {
      fail(`${what}: an entry point does not load after it:\n${head(error.stderr, 8)}`)
    }
    if (has("vitest")) {
      writeFileSync(
        join(dir, "install.test.ts"),
        [
          `import { expect, it } from "@effect/vitest"`,
          `import { Effect, Fiber, TestClock } from "effect"`,
          `import { Deadline } from "effect-resilience"`,
          `it.effect("a deadline under TestClock", () => Effect.gen(function*() {`,
          `  const fiber = yield* Effect.fork(Effect.flip(Effect.never.pipe(Deadline.within("1 second"))))`,
          `  yield* TestClock.adjust("1 second")`,
          `  expect((yield* Fiber.join(fiber))._tag).toBe("DeadlineExceeded")`,
          `}))`
        ].join("\n")
      )
      try {
        await run(join(dir, "node_modules/.bin/vitest"), ["run", "--root", dir], { cwd: dir })
      } catch (error) {
        fail(`${what}: an it.effect test does not run after it:\n${head(error.stdout, -12)}`)
      }
    }
  }
  await Promise.all([
    ...bases.map((line, i) => checkLine(line, i)),
    ...additions.map((line, i) => checkLine(line, bases.length + i, [bases[0].command]))
  ])
  for (const entry of entryNames) {
    if (!loaded.has(entry)) fail(`no documented install line makes ${specifier(entry)} load`)
  }
  if (failures.length > failedBefore) return
  console.log(
    `package check: ${lines.length} install lines of the docs installed from the registry and their entry points ` +
      `loaded (${((Date.now() - started) / 1000).toFixed(0)} s)`
  )
}

/** Whether an `npm i` line installs this edition: `effect-resilience@effect3`. */
function isThisPackage(command) {
  return command.split(/\s+/).includes("effect-resilience@effect3")
}
