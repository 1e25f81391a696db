/**
 * Every entry point of package.json `exports` can be the first one a program imports: the modules' import
 * cycles must leave no export undefined, whichever module the graph is entered from.
 */
import { describe, expect, it, vi } from "@effect/vitest"
import { readFileSync } from "node:fs"

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  readonly exports: Record<string, string | { readonly types: string }>
}
const sources = Object.entries(pkg.exports).flatMap(([name, target]): Array<readonly [string, string]> =>
  typeof target === "string" ? [] : [[name, target.types.replace(/^\.\/dist\//, "../src/").replace(/\.d\.ts$/, ".js")]]
)

const undefinedExports = async (): Promise<ReadonlyArray<string>> => {
  const missing: Array<string> = []
  for (const [name, path] of sources) {
    const module = await import(/* @vite-ignore */ path) as Record<string, unknown>
    for (const [key, value] of Object.entries(module)) {
      if (value === undefined) missing.push(`${name}: ${key}`)
      else if (name === "." && typeof value === "object" && value !== null) {
        for (const [inner, v] of Object.entries(value)) if (v === undefined) missing.push(`${key}.${inner}`)
      }
    }
  }
  return missing
}

describe("entry points", () => {
  it("exports lists the backend entry points", () => {
    expect(sources.map(([name]) => name)).toEqual(expect.arrayContaining([
      "./IdempotencyStore/Sql",
      "./IdempotencyStore/Redis",
      "./RateLimiterStore/Redis",
      "./RateLimiterStore/Sql",
      "./Consumer/Sql",
      "./PgQueue",
      "./Outbox",
      "./RedisStreamQueue",
      "./ResilientHttpClient/Node"
    ]))
  })

  it.each(sources)("%s imported first leaves no export undefined", async (_, path) => {
    vi.resetModules()
    await import(/* @vite-ignore */ path)
    expect(await undefinedExports()).toEqual([])
  }, 60_000)
})
