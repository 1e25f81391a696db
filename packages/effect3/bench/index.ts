/**
 * The Effect 3 LTS edition's bench (`npm run bench:effect3` at the root, `npm run bench` here): builds the library
 * (`dist/`), compiles this folder and the root's shared `bench/` against the built entry points
 * (`effect-resilience/*` resolves to `dist/` through the package's own `exports`) and runs it with plain `node`:
 * what users run, not the sources under a loader. The trunk's bench is packages/effect4/bench, with the same cases
 * and targets; the figures, ratios, targets and output of both are the root's `bench/report.ts`:
 *
 *   npm run bench -- [--only core,pipeline] [--json] [--check] [--rounds 3] [--stores sqlite,postgres]
 *
 * `--json` prints one JSON document (every case: name, ops/s, baseline, ratio, target, pass) and nothing else;
 * `--check` exits non-zero when a target is missed. Overhead ratios are (case − Effect.succeed) ÷ (reference −
 * Effect.succeed); "absolute" targets compare whole per-call costs (e.g. against a promise-based library),
 * "throughput" ones operations per second.
 */
import { type Comparison, flags, ratioOf, run, type Suite } from "../../../bench/report.js"
import * as breaker from "./breaker.js"
import * as bulkhead from "./bulkhead.js"
import * as core from "./core.js"
import { type Case, measure } from "./harness.js"
import * as idempotency from "./idempotency.js"
import * as limiter from "./limiter.js"
import * as pipeline from "./pipeline.js"
import * as queue from "./queue.js"
import * as redis from "./redis.js"
import * as sql from "./sqlStore.js"

interface Module {
  readonly cases: ReadonlyArray<Case>
  /** [case, reference, target ratio, kind]: overhead (the default) and "absolute" at most, "throughput" at least */
  readonly targets: ReadonlyArray<readonly [string, string, number, ("absolute" | "throughput")?]>
  /** cases measured outside the harness (e.g. promise-based libraries, throughput), in ns/op */
  readonly extra?: () => Promise<Record<string, number>>
  /** the judged ratio of a case when the module takes it itself (e.g. paired with the runs around it) */
  readonly pairedRatio?: (name: string) => number | undefined
  readonly report?: (results: ReadonlyMap<string, number>) => Promise<void>
}

/** Every suite's figures go here too: some reports compare across suites (the SQL store with Redis). */
const all = new Map<string, number>()

const suite = (name: string, m: Module): Suite => ({
  name,
  run: async ({ floor }) => {
    const cases: Record<string, number> = {}
    for (const c of m.cases) cases[c.name] = (await measure(c)).nsPerOp
    Object.assign(cases, (await m.extra?.()) ?? {})
    for (const [n, ns] of Object.entries(cases)) all.set(n, ns)
    const comparisons: Array<Comparison> = []
    for (const [caseName, reference, target, kind] of m.targets) {
      const a = cases[caseName]
      const b = cases[reference]
      if (a === undefined || b === undefined) continue
      const ratioKind = kind === "absolute" ? "time" : kind ?? "overhead"
      comparisons.push({
        case: caseName,
        baseline: reference,
        kind: ratioKind,
        ratio: m.pairedRatio?.(caseName) ?? ratioOf(ratioKind, a, b, floor),
        target: ratioKind === "throughput" ? { atLeast: target } : { atMost: target }
      })
    }
    const report = m.report
    return { cases, comparisons, ...(report === undefined ? {} : { print: () => report(all) }) }
  }
})

await run({
  edition: "effect3",
  flags: flags(),
  floor: suite("core", core),
  suites: [
    suite("core", core),
    suite("bulkhead", bulkhead),
    suite("breaker", breaker),
    suite("limiter", limiter),
    suite("pipeline", pipeline),
    suite("redis", redis),
    suite("sql", sql),
    suite("idempotency", idempotency),
    suite("queue", queue)
  ]
})
// the benches hold scopes, pools and connections open to the end: what was measured is printed
process.exit()
