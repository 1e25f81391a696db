// Checks the shape of the packages that ARCHITECTURE.md promises. Exits non-zero and lists every violation:
//
// - the core (packages/core/src) is plain TypeScript: it imports nothing from `effect`, `@effect/*` or any other
//   package, and only other files of the core (type-only imports included, so both editions share it unchanged);
// - each edition (packages/effect4, packages/effect3) reaches the core only as the package
//   `@effect-resilience/core/<module>` (no relative path into packages/core), and no file of an edition (sources,
//   tests, examples, benches, scripts) imports anything from the other edition's folder;
// - files under src/internal/ never import values from public modules (src/*.ts and the
//   backend entries): public modules describe and re-export, internal modules implement;
// - no import cycle between files of src/ through value imports (`import type` and `export type` are free);
// - the file list is the API: every public file of src/ (not internal/ or index.ts) is exactly one
//   package.json `exports` entry whose dist paths mirror it (src/A/B.ts is "./A/B" → ./dist/A/B.js and .d.ts),
//   "." is src/index.ts, and every entry has its file;
// - no file of src/internal/ or of the core over 400 lines, no function in them (any function-like node with a
//   body: declarations, expressions, arrows, methods, accessors, constructors) over 120 lines, and no internal/x.ts
//   beside an internal/x/ folder (the folder holds the module);
// - the client's combinators (internal/http/resilientHttpClient/) import no server middleware: the header names
//   both sides use live in the core's httpHeaders.ts.
//
// Imports are read with TypeScript's parser, so `import { type A }` counts as type-only only when every name is.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative, resolve } from "node:path"

const require = createRequire(import.meta.url)
const ts = require("typescript")
const root = resolve(new URL("..", import.meta.url).pathname)

const MAX_FILE_LINES = 400
const MAX_FUNCTION_LINES = 120

const skipped = new Set(["node_modules", "dist", ".examples", ".docgen"])
const files = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? skipped.has(entry.name) ? [] : files(join(dir, entry.name))
      : entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")
      ? [join(dir, entry.name)]
      : []
  )

const parse = (file) => ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)

/** Every import and re-export of a file: its specifier, the file it resolves to (if relative), type-only or not. */
const importsOf = (source) => {
  const file = source.fileName
  const found = []
  const add = (specifier, typeOnly) => {
    const text = specifier.text
    const target = text.startsWith(".") ? resolve(dirname(file), text.replace(/\.js$/, ".ts")) : undefined
    found.push({ specifier: text, target, typeOnly })
  }
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause
      const typeOnly = clause !== undefined && (clause.isTypeOnly || (
        clause.name === undefined && clause.namedBindings !== undefined &&
        ts.isNamedImports(clause.namedBindings) && clause.namedBindings.elements.length > 0 &&
        clause.namedBindings.elements.every((element) => element.isTypeOnly)
      ))
      add(statement.moduleSpecifier, typeOnly)
    } else if (ts.isExportDeclaration(statement) && statement.moduleSpecifier !== undefined) {
      const clause = statement.exportClause
      const typeOnly = statement.isTypeOnly || (
        clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 &&
        clause.elements.every((element) => element.isTypeOnly)
      )
      add(statement.moduleSpecifier, typeOnly)
    }
  }
  // import("...") in types and code
  const visit = (node) => {
    if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, true)
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments
      if (argument !== undefined && ts.isStringLiteral(argument)) add(argument, false)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

/** Every function-like node with a body longer than the limit: its line and length. */
const longFunctions = (source) => {
  const found = []
  const lineOf = (position) => source.getLineAndCharacterOfPosition(position).line + 1
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body !== undefined) {
      const first = lineOf(node.getStart(source))
      const lines = lineOf(node.getEnd()) - first + 1
      if (lines > MAX_FUNCTION_LINES) found.push({ line: first, lines })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

const failures = []
let checked = 0

const lineCount = (source) =>
  source.getLineAndCharacterOfPosition(source.getEnd()).line + (source.text.endsWith("\n") ? 0 : 1)

/** The file and function sizes of an implementation file (internal/ or the core). */
const sizes = (source, shown) => [
  ...(lineCount(source) > MAX_FILE_LINES
    ? [`${shown}: ${lineCount(source)} lines (at most ${MAX_FILE_LINES})`]
    : []),
  ...longFunctions(source).map((f) =>
    `${shown}:${f.line}: a function of ${f.lines} lines (at most ${MAX_FUNCTION_LINES})`
  )
]

/** The core: plain TypeScript that imports only itself. */
const checkCore = (dir) => {
  const src = join(dir, "src")
  const all = files(src)
  checked += all.length
  for (const file of all) {
    const source = parse(file)
    for (const i of importsOf(source)) {
      if (i.target === undefined || !i.target.startsWith(src + "/")) {
        failures.push(`${relative(root, file)}: the core imports "${i.specifier}" (core imports only other core files)`)
      }
    }
    failures.push(...sizes(source, relative(root, file)))
  }
}

/** No file of an edition reaches into the other edition's folder or into the core by a path. */
const checkBoundaries = (pkg, other) => {
  const mine = files(pkg)
  const core = join(root, "packages", "core")
  for (const file of mine) {
    for (const i of importsOf(parse(file))) {
      if (i.target !== undefined && i.target.startsWith(other + "/")) {
        failures.push(
          `${relative(root, file)}: imports "${i.specifier}" from the other edition (${relative(root, other)})`
        )
      }
      if (i.target !== undefined && i.target.startsWith(core + "/")) {
        failures.push(
          `${
            relative(root, file)
          }: imports the core by its path "${i.specifier}" (import @effect-resilience/core/<module>)`
        )
      }
    }
  }
}

/** The rules for one edition: `pkg` is its folder. */
const checkPackage = (pkg) => {
  const src = join(pkg, "src")
  const name = (file) => relative(src, file)
  const shown = (file) => relative(root, file)
  const isInternal = (file) => name(file).startsWith("internal/")
  const isPublic = (file) => !isInternal(file)
  const isClient = (file) => name(file).startsWith("internal/http/resilientHttpClient/")
  const all = files(src)
  checked += all.length

  const graph = new Map()
  for (const file of all) {
    const source = parse(file)
    const imports = importsOf(source)
    graph.set(file, imports.filter((i) => i.target !== undefined && !i.typeOnly).map((i) => i.target))
    for (const i of imports) {
      if (isInternal(file) && i.target !== undefined && !i.typeOnly && isPublic(i.target)) {
        failures.push(`${shown(file)}: internal module imports a value from the public module ${name(i.target)}`)
      }
      if (isClient(file) && i.target !== undefined && /Middleware\.ts$/i.test(i.target)) {
        failures.push(
          `${shown(file)}: the client imports the server middleware ${name(i.target)} (shared names: the core)`
        )
      }
    }
    if (isInternal(file)) {
      failures.push(...sizes(source, shown(file)))
      const folder = file.replace(/\.ts$/, "")
      if (existsSync(folder) && statSync(folder).isDirectory()) {
        failures.push(`${shown(file)}: beside the folder ${shown(folder)}/ (move it into the folder)`)
      }
    }
  }

  // the file list is the API
  const exports = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).exports ?? {}
  const wanted = new Map(
    all.filter((file) => isPublic(file)).map((file) => {
      const path = name(file).replace(/\.ts$/, "")
      return path === "index" ? [".", "index"] : [`./${path}`, path]
    })
  )
  for (const [entry, path] of wanted) {
    const target = exports[entry]
    const expected = { types: `./dist/${path}.d.ts`, default: `./dist/${path}.js` }
    if (target === undefined) {
      failures.push(`${shown(join(src, `${path}.ts`))}: no package.json exports entry "${entry}"`)
    } else if (JSON.stringify(target) !== JSON.stringify(expected)) {
      failures.push(
        `${relative(root, join(pkg, "package.json"))}: exports["${entry}"] should be ${
          JSON.stringify(expected)
        } (the file's path), is ${JSON.stringify(target)}`
      )
    }
  }
  for (const entry of Object.keys(exports)) {
    if (entry === "./package.json") continue
    if (!wanted.has(entry)) {
      failures.push(`${relative(root, join(pkg, "package.json"))}: exports["${entry}"] has no file in src/`)
    }
  }

  // Tarjan's strongly connected components over value imports
  let index = 0
  const indices = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const strongConnect = (file) => {
    indices.set(file, index)
    low.set(file, index)
    index++
    stack.push(file)
    onStack.add(file)
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue
      if (!indices.has(next)) {
        strongConnect(next)
        low.set(file, Math.min(low.get(file), low.get(next)))
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file), indices.get(next)))
      }
    }
    if (low.get(file) === indices.get(file)) {
      const component = []
      let member
      do {
        member = stack.pop()
        onStack.delete(member)
        component.push(member)
      } while (member !== file)
      if (component.length > 1) failures.push(`import cycle: ${component.map(shown).sort().join(" ⇄ ")}`)
    }
  }
  for (const file of all) if (!indices.has(file)) strongConnect(file)
}

const packages = join(root, "packages")
const [effect4, effect3] = [join(packages, "effect4"), join(packages, "effect3")]
checkCore(join(packages, "core"))
for (const [pkg, other] of [[effect4, effect3], [effect3, effect4]]) {
  checkPackage(pkg)
  checkBoundaries(pkg, other)
}

if (failures.length > 0) {
  console.error(`check-architecture: ${failures.length} problem(s)\n  ${failures.join("\n  ")}`)
  process.exit(1)
}
console.log(
  `check-architecture: ${checked} files; core is plain, the editions reach neither each other nor the core's ` +
    `files, internal imports no public values, no cycles, ` +
    `the file list is the exports, sizes within ${MAX_FILE_LINES} lines a file and ${MAX_FUNCTION_LINES} a function`
)
