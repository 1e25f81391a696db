// Checks the shape of src/ that ARCHITECTURE.md promises. Exits non-zero and lists every violation:
//
// - src/core/ is plain TypeScript: it imports nothing from `effect`, `@effect/*` or any other package, and only
//   other files of src/core/ (type-only imports included, so an Effect 4 edition can share it unchanged);
// - files under src/internal/ never import values from public modules (src/*.ts and the
//   backend entries): public modules describe and re-export, internal modules implement;
// - no import cycle between files of src/ through value imports (`import type` and `export type` are free).
//
// Imports are read with TypeScript's parser, so `import { type A }` counts as type-only only when every name is.
import { readdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative, resolve } from "node:path"

const require = createRequire(import.meta.url)
const ts = require("typescript")
const root = resolve(new URL("..", import.meta.url).pathname)
const src = join(root, "src")

const files = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? files(join(dir, entry.name))
      : entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")
      ? [join(dir, entry.name)]
      : []
  )

const name = (file) => relative(src, file)
const isCore = (file) => name(file).startsWith("core/")
const isInternal = (file) => name(file).startsWith("internal/")
const isPublic = (file) => !isCore(file) && !isInternal(file)

/** Every import and re-export of a file: its specifier, the file it resolves to (if relative), type-only or not. */
const importsOf = (file) => {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
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

const failures = []
const all = files(src)
const graph = new Map()
for (const file of all) {
  const imports = importsOf(file)
  graph.set(file, imports.filter((i) => i.target !== undefined && !i.typeOnly).map((i) => i.target))
  for (const i of imports) {
    if (isCore(file) && (i.target === undefined || !isCore(i.target))) {
      failures.push(`${name(file)}: src/core/ imports "${i.specifier}" (core imports only other core files)`)
    }
    if (isInternal(file) && i.target !== undefined && !i.typeOnly && isPublic(i.target)) {
      failures.push(`${name(file)}: internal module imports a value from the public module ${name(i.target)}`)
    }
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
    if (component.length > 1) failures.push(`import cycle: ${component.map(name).sort().join(" ⇄ ")}`)
  }
}
for (const file of all) if (!indices.has(file)) strongConnect(file)

if (failures.length > 0) {
  console.error(`check-architecture: ${failures.length} problem(s)\n  ${failures.join("\n  ")}`)
  process.exit(1)
}
console.log(`check-architecture: ${all.length} files; core is plain, internal imports no public values, no cycles`)
