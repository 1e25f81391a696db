/**
 * docs/observability.md's Traces section names every span and event the library makes: the names are read from
 * the sources (each `Effect.withSpan("…")` and span `event("…")` call of src/), so a new one the docs miss fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const src = fileURLToPath(new URL("../../src/", import.meta.url))
const doc = readFileSync(fileURLToPath(new URL("../../../../docs/observability.md", import.meta.url)), "utf8")
const traces = doc.slice(doc.indexOf("## Traces"), doc.indexOf("## Reading them in an incident"))

const files = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? files(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : []
  )

/** The literal names given to `withSpan`, `event`, `spanEvent` and `eventUnsafe` in src/. */
const named = () => {
  const names = new Set<string>()
  const call = /(?:withSpan|\bevent|spanEvent|eventUnsafe)\((?:[\w.]+, )?"([A-Za-z]+\.[a-z_]+)"/g
  for (const file of files(src)) {
    for (const match of readFileSync(file, "utf8").matchAll(call)) names.add(match[1]!)
  }
  // the limiters' events are named for the module that owns the slots (`${module}.queued`, `.rejected`)
  for (const module of ["Bulkhead", "AdaptiveLimiter"]) {
    names.add(`${module}.queued`)
    names.add(`${module}.rejected`)
  }
  return [...names].sort()
}

describe("docs/observability.md, Traces", () => {
  it("names every span and event of the library", () => {
    const names = named()
    expect(names).toEqual(expect.arrayContaining([
      "ResilientHttpClient.request",
      "ResilientHttpClient.attempt",
      "Retry.backoff",
      "Retry.exhausted",
      "queue.handle"
    ]))
    expect(names.filter((name) => !traces.includes(`\`${name}\``))).toEqual([])
  })
})
