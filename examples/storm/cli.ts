/**
 * `npm run storm`'s command line and sweep, shared by both editions (examples/storm.ts, and the Effect 4 edition's
 * packages/effect4/examples/storm.ts): each brings its own `runCell`. No Effect here.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import { join, relative, resolve } from "node:path"
import { parseArgs } from "node:util"
import { parentPort, workerData } from "node:worker_threads"
import { runPool, start } from "../support/workerPool.js"
import { type Cell, policies, type Policy } from "./figures.js"
import { defaultScenario, type Scenario } from "./model.js"
import { checks, goodputChart, table, timelineChart, toCsv, toJson } from "./report.js"

// the runs build hundreds of thousands of timeout and overload errors that nobody prints: their stack traces
// cost a tenth of the CPU and say nothing
Error.stackTraceLimit = 0

interface Task {
  readonly policy: Policy
  readonly load: number
}

interface Shared {
  readonly seed: number
  readonly scenario: Scenario
}

const usage = `usage: npm run storm -- [options]

  --loads SPEC     offered loads as multiples of capacity: a list and/or from..to:step   (default 0.5..3:0.5)
  --seed N         an integer; the same seed gives the same results                      (default 12)
  --out DIR        where results.csv goes                                                (default storm-out/)
  --images DIR     where the two SVG charts go                                           (default docs/images/)
  --threads N      threads computing the sweep                     (default: CPU count, at most 4)
  --policies LIST  a comma-separated subset of ${policies.join(",")}          (default: all)
  --max-rejection-rate R   the throttles' maxRejectionRate in [0, 1]         (default: the library's)
  --json           end with one JSON line: { "capacity", "rows": [...] }
  --help`

const parseLoads = (spec: string): ReadonlyArray<number> => {
  const loads = spec.split(",").flatMap((part) => {
    const range = /^([\d.]+)\.\.([\d.]+):([\d.]+)$/.exec(part.trim())
    if (range === null) return [Number(part)]
    const [from, to, step] = [Number(range[1]), Number(range[2]), Number(range[3])]
    const out: Array<number> = []
    for (let i = 0; from + i * step <= to + 1e-9; i++) out.push(Number((from + i * step).toFixed(6)))
    return out
  })
  if (loads.length === 0 || loads.some((l) => !(l > 0 && Number.isFinite(l)))) {
    throw new Error(`--loads: expected positive numbers or ranges like 0.5..3:0.5, got "${spec}"`)
  }
  return loads
}

const positiveInt = (name: string, text: string): number => {
  const n = Number(text)
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name}: expected a non-negative integer, got "${text}"`)
  return n
}

/** What an edition's `npm run storm` brings: how it runs a cell, and the module its worker threads load. */
export interface Edition {
  readonly runCell: (scenario: Scenario, policy: Policy, load: number, seed: number) => Cell
  /** The edition's storm.ts: it calls {@link stormCli} in worker threads too, where it serves cells. */
  readonly moduleUrl: string
  /** A module worker threads import first to load TypeScript; without it, tsx (the Effect 3 edition's way). */
  readonly preload?: string
}

const parsePolicies = (list: string | undefined): ReadonlyArray<Policy> => {
  if (list === undefined) return policies
  const chosen = list.split(",").map((p) => p.trim())
  const unknown = chosen.filter((p) => !(policies as ReadonlyArray<string>).includes(p))
  if (chosen.length === 0 || unknown.length > 0) throw new Error(`--policies: unknown ${unknown.join(", ")}`)
  return policies.filter((p) => chosen.includes(p))
}

const parseRate = (text: string | undefined): number | undefined => {
  if (text === undefined) return undefined
  const rate = Number(text)
  if (!(rate >= 0 && rate <= 1)) throw new Error(`--max-rejection-rate: expected a number in [0, 1], got "${text}"`)
  return rate
}

const main = (edition: Edition) => async () => {
  const { values } = parseArgs({
    options: {
      loads: { type: "string", default: "0.5..3:0.5" },
      seed: { type: "string", default: "12" },
      out: { type: "string", default: "storm-out/" },
      images: { type: "string", default: "docs/images/" },
      threads: { type: "string" },
      policies: { type: "string" },
      "max-rejection-rate": { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", default: false }
    }
  })
  if (values.help) return console.log(usage)
  const loads = parseLoads(values.loads)
  const seed = positiveInt("--seed", values.seed)
  const threads = values.threads === undefined
    ? Math.min(4, availableParallelism())
    : Math.max(1, positiveInt("--threads", values.threads))
  const chosen = parsePolicies(values.policies)
  const rate = parseRate(values["max-rejection-rate"])
  const scenario: Scenario = rate === undefined ? defaultScenario : { ...defaultScenario, maxRejectionRate: rate }

  console.log(
    `storm: ${chosen.length} policies × ${loads.length} loads, seed ${seed}, ${threads} thread(s)` +
      (rate === undefined ? "" : `, maxRejectionRate ${rate}`)
  )
  const started = performance.now()
  const cpuBefore = process.cpuUsage()
  const tasks = loads.flatMap((load) => chosen.map((policy) => ({ policy, load })))
  const shared: Shared = { seed, scenario }
  // cells, heaviest first, to the main thread and `threads - 1` workers
  const unordered = await runPool([...tasks].sort((a, b) => b.load - a.load), {
    threads,
    moduleUrl: edition.moduleUrl,
    ...(edition.preload === undefined ? {} : { preload: edition.preload }),
    workerData: shared,
    resourceLimits: { maxYoungGenerationSizeMb: 96 },
    compute: (task) => edition.runCell(scenario, task.policy, task.load, seed)
  })
  const cells = [...unordered].sort((a, b) =>
    policies.indexOf(a.row.policy) - policies.indexOf(b.row.policy) || a.row.offered - b.row.offered
  )
  const cpu = process.cpuUsage(cpuBefore)
  const wall = (performance.now() - started) / 1_000
  const rows = cells.map((c) => c.row)

  // relative to where the command was typed: the Effect 4 edition runs from packages/effect4 (.ci/effect4.sh)
  const base = process.env["EFFECT_RESILIENCE_CWD"] ?? process.cwd()
  const out = resolve(base, values.out)
  const images = resolve(base, values.images)
  mkdirSync(out, { recursive: true })
  mkdirSync(images, { recursive: true })
  const timelineLoad = loads.includes(2) ? 2 : loads.at(-1)!
  const files = [
    [join(out, "results.csv"), toCsv(rows)],
    [join(images, "storm-goodput.svg"), goodputChart(scenario, rows)],
    [join(images, "storm-timeline.svg"), timelineChart(scenario, cells, timelineLoad)]
  ] as const
  for (const [path, text] of files) writeFileSync(path, text)

  console.log()
  console.log(table(scenario, rows))
  console.log()
  for (const line of checks(scenario, cells)) console.log(line)
  console.log()
  console.log(`wrote ${files.map(([path]) => relative(base, path)).join(", ")}`)
  // process.cpuUsage counts every thread of the process
  console.log(
    `sweep: wall ${wall.toFixed(2)} s, CPU ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s (all threads); ` +
      `${(performance.now() / 1_000).toFixed(2)} s since the process started`
  )
  if (values.json) console.log(toJson(scenario, rows))
}

/** `npm run storm`'s command line on the main thread; in a worker thread, the cells it is handed. */
export const stormCli = (edition: Edition): void =>
  start(main(edition), () => {
    const shared = workerData as Shared
    parentPort!.on(
      "message",
      (task: Task) => parentPort!.postMessage(edition.runCell(shared.scenario, task.policy, task.load, shared.seed))
    )
  }, usage)
