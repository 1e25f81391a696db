// Checks the shape of src/ that ARCHITECTURE.md promises. Exits non-zero and lists every violation:
//
// - src/core/ is plain TypeScript: it imports nothing from `effect`, `@effect/*` or any other package, and only
//   other files of src/core/ (type-only imports included, so an Effect 4 edition can share it unchanged);
// - files under src/internal/ never import values from public modules (src/*.ts and the
//   backend entries): public modules describe and re-export, internal modules implement;
// - no import cycle between files of src/ through value imports (`import type` and `export type` are free);
// - the file list is the API: every public file of src/ (not internal/, core/ or index.ts) is exactly one
//   package.json `exports` entry whose dist paths mirror it (src/A/B.ts is "./A/B" → ./dist/A/B.js and .d.ts),
//   "." is src/index.ts, and every entry has its file;
// - no file of src/internal/ or src/core/ over 400 lines, no function in them (any function-like node with a body:
//   declarations, expressions, arrows, methods, accessors, constructors) over 120 lines, and no internal/x.ts beside
//   an internal/x/ folder (the folder holds the module);
// - the client's combinators (internal/http/resilientHttpClient/) import no server middleware: the header names
//   both sides use live in core/httpHeaders.ts.
//
// The same rules hold for the Effect 4 edition in packages/effect4. Its src/core is a generated copy of src/core
// (packages/effect4/scripts/core.mjs), so it is checked once, here, as src/core.
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

const files = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? files(join(dir, entry.name))
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

/** The rules for one package: `pkg` is its folder; `withCore` false when its src/core is a generated copy. */
const checkPackage = (pkg, { withCore }) => {
  const src = join(pkg, "src")
  const name = (file) => relative(src, file)
  const shown = (file) => relative(root, file)
  const isCore = (file) => name(file).startsWith("core/")
  const isInternal = (file) => name(file).startsWith("internal/")
  const isPublic = (file) => !isCore(file) && !isInternal(file)
  const isClient = (file) => name(file).startsWith("internal/http/resilientHttpClient/")
  const all = files(src).filter((file) => withCore || !isCore(file))
  checked += all.length

  const graph = new Map()
  for (const file of all) {
    const source = parse(file)
    const imports = importsOf(source)
    graph.set(file, imports.filter((i) => i.target !== undefined && !i.typeOnly).map((i) => i.target))
    for (const i of imports) {
      if (isCore(file) && (i.target === undefined || !isCore(i.target))) {
        failures.push(`${shown(file)}: src/core/ imports "${i.specifier}" (core imports only other core files)`)
      }
      if (isInternal(file) && i.target !== undefined && !i.typeOnly && isPublic(i.target)) {
        failures.push(`${shown(file)}: internal module imports a value from the public module ${name(i.target)}`)
      }
      if (isClient(file) && i.target !== undefined && /Middleware\.ts$/i.test(i.target)) {
        failures.push(
          `${shown(file)}: the client imports the server middleware ${name(i.target)} (shared names: core/)`
        )
      }
    }
    const layout = []
    if (!isPublic(file)) {
      const lines = source.getLineAndCharacterOfPosition(source.getEnd()).line + (source.text.endsWith("\n") ? 0 : 1)
      if (lines > MAX_FILE_LINES) layout.push(`${shown(file)}: ${lines} lines (at most ${MAX_FILE_LINES})`)
      for (const f of longFunctions(source)) {
        layout.push(`${shown(file)}:${f.line}: a function of ${f.lines} lines (at most ${MAX_FUNCTION_LINES})`)
      }
    }
    if (isInternal(file)) {
      const folder = file.replace(/\.ts$/, "")
      if (existsSync(folder) && statSync(folder).isDirectory()) {
        layout.push(`${shown(file)}: beside the folder ${shown(folder)}/ (move it into the folder)`)
      }
    }
    failures.push(...layout)
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

checkPackage(root, { withCore: true })
const effect4 = join(root, "packages", "effect4")
if (existsSync(join(effect4, "package.json"))) checkPackage(effect4, { withCore: false })

if (failures.length > 0) {
  console.error(`check-architecture: ${failures.length} problem(s)\n  ${failures.join("\n  ")}`)
  process.exit(1)
}
console.log(
  `check-architecture: ${checked} files; core is plain, internal imports no public values, no cycles, ` +
    `the file list is the exports, sizes within ${MAX_FILE_LINES} lines a file and ${MAX_FUNCTION_LINES} a function`
)
