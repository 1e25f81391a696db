// What the package checks of both editions share: packages/effect3/scripts/package.mjs (the Effect 3 edition) and
// packages/effect4/scripts/package.mjs (the Effect 4 edition). Plain Node, no dependency.
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize } from "node:path"

/** The import specifier of a package.json `exports` entry: "." → effect-resilience, "./A/B" → effect-resilience/A/B. */
export const specifier = (entry) => entry === "." ? "effect-resilience" : `effect-resilience/${entry.slice(2)}`

/**
 * Packs the package in `dir` into `work` (npm pack, which runs its `prepack`) and returns the tarball's path and the
 * set of the files in it, relative to the package.
 */
export function pack(dir, work) {
  execFileSync("npm", ["pack", "--pack-destination", work, "--silent"], {
    cwd: dir,
    stdio: ["ignore", "ignore", "inherit"]
  })
  const name = readdirSync(work).find((f) => f.endsWith(".tgz"))
  if (name === undefined) throw new Error("npm pack produced no tarball")
  const tarball = join(work, name)
  const listing = new Set(
    execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" })
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => l.replace(/^package\//, ""))
  )
  return { tarball, listing }
}

/**
 * Reports to `fail` what the tarball of the package in `dir` lacks: package.json, README.md, LICENSE, each
 * `exports` entry's .d.ts and .js, and every file a relative link of its shipped markdown points to.
 */
export function checkListing(dir, listing, entries, fail) {
  for (const file of ["package.json", "README.md", "LICENSE"]) {
    if (!listing.has(file)) fail(`the tarball has no ${file}`)
  }
  for (const [name, target] of entries) {
    for (const file of [target.types, target.default]) {
      if (!listing.has(file.replace(/^\.\//, ""))) fail(`exports["${name}"]: ${file} is not in the tarball`)
    }
  }
  for (const doc of [...listing].filter((f) => f.endsWith(".md"))) {
    const text = readFileSync(join(dir, doc), "utf8")
    for (const [, target] of text.matchAll(/\]\(([^)\s#]+)(?:#[^)]*)?\)/g)) {
      if (/^[a-z]+:/i.test(target)) continue
      if (!listing.has(normalize(join(dirname(doc), target)))) {
        fail(`${doc} links to ${target}, which is not in the tarball`)
      }
    }
  }
}

/**
 * `names` and every package they depend on (dependencies, required peers), as installed at the top level of
 * `modules` (a node_modules folder).
 */
export function closure(modules, names) {
  const seen = new Set()
  const visit = (name) => {
    if (seen.has(name)) return
    const manifest = join(modules, name, "package.json")
    if (!existsSync(manifest)) return // nested under its parent, which carries it
    seen.add(name)
    const p = JSON.parse(readFileSync(manifest, "utf8"))
    const optional = p.peerDependenciesMeta ?? {}
    const peers = Object.keys(p.peerDependencies ?? {}).filter((n) => optional[n]?.optional !== true)
    for (const dep of [...Object.keys(p.dependencies ?? {}), ...peers]) visit(dep)
  }
  names.forEach(visit)
  return [...seen]
}

/** The first `n` lines of `text` (the last ones when `n` is negative). */
export function head(text, n) {
  const lines = String(text).split("\n")
  return (n < 0 ? lines.slice(n) : lines.slice(0, n)).join("\n")
}

/** name → the versions installed, from `npm ls --all --json`. */
export function versionsIn(tree, found = new Map()) {
  for (const [name, node] of Object.entries(tree.dependencies ?? {})) {
    if (node.version !== undefined) {
      if (!found.has(name)) found.set(name, new Set())
      found.get(name).add(node.version)
    }
    versionsIn(node, found)
  }
  return found
}

/** An `npm i` line's arguments to npm, `effect-resilience` (as `spec` names it) replaced by the tarball. */
export function npmArgs(command, spec, tarball) {
  return [
    ...command.split(/\s+/).slice(1).map((a) => a === spec ? tarball : a),
    "--no-audit",
    "--no-fund",
    "--ignore-scripts",
    "--prefer-offline"
  ]
}

/** The package names an `npm i` line installs, without their versions or tags. */
export function namedPackages(command) {
  return command.split(/\s+/).slice(2).filter((a) => !a.startsWith("-")).map((a) => a.replace(/(.)@.*$/, "$1"))
}
