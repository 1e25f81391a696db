/**
 * `npm run bench` builds the library (`dist/`), compiles this folder against the built entry points
 * (`effect-resilience/*` resolves to `dist/` through the package's own `exports`) and runs it with plain
 * `node`: what users run, not the sources under a loader. It prints ns/op per case and the ratios the
 * issues set as targets; `npm run -s bench -- --json` prints `{ cases: { name: nsPerOp } }` and nothing else;
 * `npm run bench -- --only core,pipeline` runs only those suites (the file names here).
 *
 * Overhead = ns/op of a case minus the `Effect.succeed` baseline; ratios compare overheads, except targets
 * marked "absolute", which compare whole per-call costs (e.g. against a promise-based library).
 */
import * as breaker from "./breaker.js"
import * as bulkhead from "./bulkhead.js"
import * as core from "./core.js"
import { type Case, fmt, measure, type Result } from "./harness.js"
import * as idempotency from "./idempotency.js"
import * as limiter from "./limiter.js"
import * as pipeline from "./pipeline.js"
import * as queue from "./queue.js"
import * as redis from "./redis.js"
import * as sql from "./sqlStore.js"

const json = process.argv.includes("--json")
interface Suite {
  readonly cases: ReadonlyArray<Case>
  /** [case, reference, target ratio, "absolute" to compare whole per-call costs instead of overheads] */
  readonly targets: ReadonlyArray<readonly [string, string, number, "absolute"?]>
  /** cases measured outside the harness (e.g. promise-based libraries), in ns/op */
  readonly extra?: () => Promise<Record<string, number>>
  readonly report?: (results: ReadonlyMap<string, number>) => Promise<void>
}
const all: Record<string, Suite> = { core, bulkhead, breaker, limiter, pipeline, redis, sql, idempotency, queue }
const only = process.argv.indexOf("--only")
const picked = only === -1 ? Object.keys(all) : (process.argv[only + 1] ?? "").split(",")
for (const name of picked) {
  if (!(name in all)) throw new Error(`no bench suite "${name}": ${Object.keys(all).join(", ")}`)
}
// every ratio is taken over the `Effect.succeed` baseline, which the core suite measures first
const baseline: Suite = { cases: core.cases.filter((c) => c.name === "Effect.succeed"), targets: [] }
const suites: ReadonlyArray<Suite> = [...picked.includes("core") ? [] : [baseline], ...picked.map((name) => all[name]!)]

const results: Array<Result> = []
for (const suite of suites) {
  for (const c of suite.cases) {
    const r = await measure(c)
    results.push(r)
    if (!json) console.log(`${c.name.padEnd(40)} ${fmt(r.nsPerOp).padStart(10)}/op`)
  }
  for (const [name, nsPerOp] of Object.entries((await suite.extra?.()) ?? {})) {
    results.push({ name, nsPerOp })
    if (!json) console.log(`${name.padEnd(40)} ${fmt(nsPerOp).padStart(10)}/op`)
  }
}

const byName = new Map(results.map((r) => [r.name, r.nsPerOp]))
const floor = byName.get("Effect.succeed") ?? 0
if (json) {
  console.log(JSON.stringify({ cases: Object.fromEntries(byName) }))
} else {
  console.log("\noverhead ratios (case − Effect.succeed) / (reference − Effect.succeed):")
  for (const suite of suites) {
    for (const [name, reference, target, kind] of suite.targets) {
      const a = byName.get(name)
      const b = byName.get(reference)
      if (a === undefined || b === undefined) continue
      const ratio = kind === "absolute" ? a / b : Math.max(0, a - floor) / Math.max(1, b - floor)
      const verdict = ratio <= target ? "ok" : "MISSED"
      console.log(`${name} / ${reference}`.padEnd(40), `${ratio.toFixed(3)}×  (target ≤ ${target}×) ${verdict}`)
    }
  }
  for (const suite of suites) await suite.report?.(byName)
}
