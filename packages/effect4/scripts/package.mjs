// Checks the Effect 4 edition as a user gets it (run by `bash .ci/effect4.sh check`, on Node 22). `npm pack`, whose
// `prepack` cleans and builds dist/, into a temporary directory, then:
//
// - the manifest is the published identity: `effect-resilience` 1.x, `publishConfig.tag` "latest", not private;
// - every `exports` entry's .js and .d.ts, README.md and LICENSE are in the tarball, and every relative link of the
//   shipped markdown resolves inside it;
// - what the repository's README.md says (scripts/readme.mjs reads it): its first ```ts block is the example, to be
//   saved under the name it gives and run with the command it gives in a project made by `npm init -y`, printing
//   what it says; the `npm i` lines of the ```sh blocks of README.md and docs/*.md (but docs/effect3.md, and any line
//   naming `effect-resilience@effect3`: packages/effect3/scripts/package.mjs checks those) are the install lines;
// - linked (no network): a project made by `npm init -y`, with the tarball and this edition's own effect,
//   @effect/platform-node, ioredis and @types/node (symlinked from node_modules/), type-checks the example and an
//   import of every entry point with `strict` and `skipLibCheck: false`, runs the example as the README says, and
//   loads every entry point in Node;
// - from the registry: every install line, the tarball in place of `effect-resilience`, in a fresh `npm init -y`
//   project each. It must install one copy of `effect`, a 4.x (what `npm i effect` takes today); the entry
//   points whose peers it installed must load; the first (core) line's project type-checks the example and every
//   entry point that needs no optional peer (with TypeScript and @types/node added, as a user's project has them)
//   and runs the example as the README says; the other lines type-check the entry points they are for; a line that
//   installs vitest runs an `it.effect` test. Install scripts are not run. EFFECT_RESILIENCE_OFFLINE=1 skips this
//   part and says so; an install that fails for want of the registry fails the check with CI=true and is reported
//   otherwise.
//
// The type-checks are whole: effect's own declarations are checked too, as a user's `tsc` with skipLibCheck: false
// does, with the project's @types/node, which declares the web globals they name (`AbortSignal`, `ReadableStream`),
// and `lib: ["ES2022"]`, as the README says. The linked project adds "DOM" to lib, as the README says for the effect
// it has: this edition's own, 4.1.0, whose declarations also name `CryptoKey` and `JsonWebKey` (4.1.5, which the
// registry's lines install, declares them itself). Exits non-zero on any failure.
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
import { exampleRun, fencedBlocks, installLines } from "./readme.mjs"

const here = fileURLToPath(new URL("..", import.meta.url))
if (process.argv[2] === "--typecheck") process.exit(typecheck(process.argv[3]))
const pkg = JSON.parse(readFileSync(join(here, "package.json"), "utf8"))
const run = promisify(execFile)
const offline = process.env["EFFECT_RESILIENCE_OFFLINE"] === "1"
const ci = process.env["CI"] === "true"

/** The entries that import an optional peer, and the peers their users install. */
const backends = {
  "./CircuitBreaker/Redis": ["ioredis"],
  "./IdempotencyStore/Redis": ["ioredis"],
  "./RateLimiterStore/Redis": ["ioredis"],
  "./RedisStreamQueue": ["ioredis"],
  "./ResilientHttpClient/Node": ["@effect/platform-node"]
}

const failures = []
const fail = (message) => failures.push(message)
const entries = Object.entries(pkg.exports).filter(([name]) => name !== "./package.json")
const entryNames = entries.map(([name]) => name)
const plain = entryNames.filter((name) => !(name in backends))

if (pkg.name !== "effect-resilience" || !/^[1-9]\d*\./.test(pkg.version) || pkg.private === true) {
  fail(`package.json should be effect-resilience 1.x (or later), public; is ${pkg.name} ${pkg.version}`)
}
if (pkg.publishConfig?.tag !== "latest") fail(`package.json publishConfig.tag should be "latest"`)
for (const name of Object.keys(backends)) {
  if (pkg.exports[name] === undefined) fail(`exports has no "${name}"`)
}

const readme = readmeParts()
const work = mkdtempSync(join(tmpdir(), "effect-resilience-effect4-package-"))
try {
  const { tarball, listing } = pack(here, work)
  checkListing(here, listing, entries, fail)
  if (failures.length > 0) throw new Error("the tarball is incomplete")
  await checkLinked(tarball)
  if (offline) {
    console.log(
      `effect4 package check: EFFECT_RESILIENCE_OFFLINE=1, the ${readme.lines.length} Effect 4 install lines were NOT installed from the registry`
    )
  } else {
    await checkInstallLines(tarball)
  }
} catch (error) {
  fail(error instanceof Error ? error.message : String(error))
}

if (failures.length > 0) {
  for (const f of failures) console.error(`effect4 package check: ${f}`)
  console.error(`(left ${work} for inspection)`)
  process.exit(1)
}
rmSync(work, { recursive: true, force: true })
console.log(
  `effect4 package check: ${pkg.name}@${pkg.version} packed with ${entries.length} entries; the README example ` +
    `type-checks (skipLibCheck: false) and runs${offline ? " (linked)" : ", linked and from the registry"}`
)

/**
 * What the repository's README.md says: the example (its first ```ts block), the file to save it in, the command
 * that runs it and what it prints; and the install lines of the README and the guides (each once, the README's
 * first).
 */
function readmeParts() {
  const repo = join(here, "../..")
  const text = readFileSync(join(repo, "README.md"), "utf8")
  const example = fencedBlocks(text).find(([, lang]) => lang === "ts")?.[2]
  if (example === undefined) fail("README.md has no ```ts block (the example)")
  const how = exampleRun(text)
  if (how === undefined) {
    fail("README.md does not say how to run its example: \"save it as `<file>`\", \"run `node …`\", \"prints `…`\"")
  } else if (how.command.split(/\s+/)[0] !== "node" || !how.command.split(/\s+/).includes(how.file)) {
    fail(`README.md: \`${how.command}\` does not run \`${how.file}\` with node`)
  }
  const guides = readdirSync(join(repo, "docs")).filter((f) => f.endsWith(".md") && f !== "effect3.md")
  const lines = [
    ...new Set(
      [text, ...guides.map((f) => readFileSync(join(repo, "docs", f), "utf8"))].flatMap((t) =>
        installLines(fencedBlocks(t))
      )
    )
  ]
  if (!lines.some((line) => line.split(/\s+/).includes("effect-resilience"))) {
    fail("README.md has no install line that installs effect-resilience")
  }
  return { example: example ?? "", run: how ?? { file: "example.mts", command: "node example.mts", output: "" }, lines }
}

/** A fresh project in `dir`, as the README has a user make one: `npm init -y` (its package.json, nothing else). */
async function npmInit(dir) {
  mkdirSync(dir, { recursive: true })
  await run("npm", ["init", "-y"], { cwd: dir })
}

/** A project of the tarball and this edition's installed packages, symlinked: type-check, run, load. */
async function checkLinked(tarball) {
  const dir = join(work, "linked")
  await npmInit(dir)
  const modules = join(dir, "node_modules")
  unpack(tarball, modules)
  for (
    const name of closure(join(here, "node_modules"), ["effect", "@effect/platform-node", "ioredis", "@types/node"])
  ) {
    mkdirSync(dirname(join(modules, name)), { recursive: true })
    symlinkSync(join(here, "node_modules", name), join(modules, name), "dir")
  }
  await checkProject(dir, "linked", { entries: entryNames, example: true, dom: true })
}

/**
 * In `dir` (its node_modules ready): the example (when asked) and an import of each of `entries` type-check, the
 * example runs and prints, and every entry point loads in Node.
 */
async function checkProject(dir, what, { dom = false, entries: names, example }) {
  // .mts: an ES module whatever the `type` of the project's package.json (npm init -y writes "commonjs")
  const files = ["entries.mts", ...(example ? [readme.run.file] : [])]
  writeFileSync(
    join(dir, "entries.mts"),
    names.map((entry, i) => `import * as M${i} from "${specifier(entry)}"\n`).join("") +
      `export const all: ReadonlyArray<object> = [${names.map((_, i) => `M${i}`)}]\n`
  )
  if (example) writeFileSync(join(dir, readme.run.file), readme.example)
  writeFileSync(
    join(dir, "tsconfig.json"),
    // no `types`: the project's @types/node (included as TypeScript includes node_modules/@types) is what declares
    // the web globals of effect's declarations, as the README says
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        lib: dom ? ["ES2022", "DOM"] : ["ES2022"],
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        skipLibCheck: false,
        noEmit: true
      },
      files
    })
  )
  const checks = [
    names.length === 0 && !example ? Promise.resolve() : run(
      process.execPath,
      [fileURLToPath(import.meta.url), "--typecheck", dir],
      { cwd: dir, maxBuffer: 16 << 20 }
    ).catch((error) =>
      fail(`${what}: ${files.join(" and ")} do not type-check (skipLibCheck: false):\n${head(error.stdout, 30)}`)
    ),
    run(
      process.execPath,
      ["--input-type=module", "-e", names.map((e) => `await import("${specifier(e)}")`).join("\n")],
      {
        cwd: dir
      }
    ).catch((error) => fail(`${what}: an entry point does not load:\n${head(error.stderr, 12)}`))
  ]
  if (example) {
    // the README's command, as it is written (Node >= 22.18 runs TypeScript that is only erasable syntax, as the
    // README's example is); `node` is this Node, the one the edition needs
    const [, ...args] = readme.run.command.split(/\s+/)
    checks.push(
      run(process.execPath, args, { cwd: dir, timeout: 60_000 })
        .then(({ stdout }) => {
          if (stdout.trim() !== readme.run.output) {
            fail(
              `${what}: \`${readme.run.command}\` printed ${
                JSON.stringify(stdout.trim())
              }, not the README's "${readme.run.output}"`
            )
          }
        })
        .catch((error) =>
          fail(`${what}: \`${readme.run.command}\` does not run as the README says:\n${head(error.stderr, 12)}`)
        )
    )
  }
  await Promise.all(checks)
}

/** Each Effect 4 install line of the README in a fresh project, from the registry (see the top). */
async function checkInstallLines(tarball) {
  const started = Date.now()
  const failedBefore = failures.length
  const npm = (dir, command) =>
    run("npm", npmArgs(command, "effect-resilience", tarball), { cwd: dir, maxBuffer: 16 << 20 })
  const bases = readme.lines.filter((l) => l.split(/\s+/).includes("effect-resilience"))
  const additions = readme.lines.filter((l) => !bases.includes(l))
  const loaded = new Set()
  const effects = new Set()
  let unreachable = false
  const checkLine = async (command, i, before = []) => {
    const dir = join(work, `install-${i}`)
    await npmInit(dir)
    const what = `"${command}"`
    const core = i === 0
    try {
      // TypeScript and Node's types, as a user's project has them, for the type-checks
      for (const c of [...before, command, "npm i -D @types/node@22"]) await npm(dir, c)
    } catch (error) {
      const stderr = String(error.stderr ?? error)
      if (/ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ENETUNREACH/.test(stderr)) unreachable = true
      return fail(`${what} does not install:\n${head(stderr, 12)}`)
    }
    const has = (name) => existsSync(join(dir, "node_modules", name, "package.json"))
    const listed = await run("npm", ["ls", "--all", "--json"], { cwd: dir, maxBuffer: 64 << 20 }).catch((e) => e)
    const versions = versionsIn(JSON.parse(listed.stdout))
    for (const [name, found] of versions) {
      if ((name === "effect" || name.startsWith("@effect/") || name === "effect-resilience") && found.size > 1) {
        fail(`${what} installs ${found.size} copies of ${name} (${[...found].join(", ")})`)
      }
    }
    const effect = [...(versions.get("effect") ?? [])]
    effect.forEach((v) => effects.add(v))
    if (!effect.every((v) => v.startsWith("4."))) fail(`${what} installs effect ${effect.join(", ")}, not 4.x`)
    // the entries this line is for: the core line's need no peer; another line's need what it installed
    const usable = entryNames.filter((e) => (backends[e] ?? []).every(has))
    const mine = core ? plain : usable.filter((e) => e in backends)
    await checkProject(dir, what, { entries: mine, example: core })
    const named = namedPackages(command)
    const others = named.filter((n) => n !== "effect-resilience" && n !== "vitest" && n !== "@effect/vitest")
    try {
      const script = [...usable.map(specifier), ...others].map((m) => `await import(${JSON.stringify(m)})`).join("\n")
      await run(process.execPath, ["--input-type=module", "-e", script], { cwd: dir })
      usable.forEach((e) => loaded.add(e))
    } catch (error) {
      fail(`${what}: an entry point does not load after it:\n${head(error.stderr, 8)}`)
    }
    if (has("vitest")) await checkVitest(dir, what)
  }
  await Promise.all([
    ...bases.map((line, i) => checkLine(line, i)),
    ...additions.map((line, i) => checkLine(line, bases.length + i, [bases[0]]))
  ])
  for (const entry of entryNames) {
    if (!loaded.has(entry)) fail(`no Effect 4 install line of the README and docs/ makes ${specifier(entry)} load`)
  }
  if (unreachable && !ci) {
    // without CI, a machine without the registry reports it and is not failed for it
    const mine = failures.splice(failedBefore)
    console.warn(
      `effect4 package check: the registry is unreachable; the install lines were NOT checked:\n${mine.join("\n")}`
    )
    return
  }
  if (failures.length > failedBefore) return
  console.log(
    `effect4 package check: ${readme.lines.length} Effect 4 install lines installed from the registry (effect ` +
      `${[...effects].join(", ")}), the example type-checked and run, every entry point loaded ` +
      `(${((Date.now() - started) / 1000).toFixed(0)} s)`
  )
}

/** An `it.effect` test under the TestClock runs in the project in `dir`. */
async function checkVitest(dir, what) {
  writeFileSync(
    join(dir, "install.test.ts"),
    [
      `import { expect, it } from "@effect/vitest"`,
      `import { Effect, Fiber } from "effect"`,
      `import { TestClock } from "effect/testing"`,
      `import { Deadline } from "effect-resilience"`,
      `it.effect("a deadline under TestClock", () => Effect.gen(function*() {`,
      `  const fiber = yield* Effect.forkChild(Effect.flip(Effect.never.pipe(Deadline.within("1 second"))))`,
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

/** Type-checks the project in `dir` with this edition's TypeScript: every file, effect's declarations included. */
function typecheck(dir) {
  const ts = createRequire(join(here, "package.json"))("typescript")
  const host = { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} }
  const config = ts.getParsedCommandLineOfConfigFile(join(dir, "tsconfig.json"), {}, host)
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options })
  if (!program.getSourceFiles().some((f) => f.fileName.includes("/node_modules/effect-resilience/"))) {
    console.log("no declaration of effect-resilience was loaded")
    return 1
  }
  const diagnostics = [...config.errors, ...ts.getPreEmitDiagnostics(program)]
  const format = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => dir, getNewLine: () => "\n" }
  if (diagnostics.length > 0) console.log(ts.formatDiagnostics(diagnostics, format))
  return diagnostics.length === 0 ? 0 : 1
}

/** Extracts the tarball as `effect-resilience` in `modules`. */
function unpack(tarball, modules) {
  mkdirSync(join(modules, "effect-resilience"), { recursive: true })
  execFileSync("tar", ["-xzf", tarball, "-C", join(modules, "effect-resilience"), "--strip-components=1"])
}
