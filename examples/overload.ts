/**
 * `npm run overload`: the orders service as a resource of fixed capacity, offered three times what it can
 * take, with and without adaptive load shedding — real processes on 127.0.0.1. See docs/overload.md, "Real
 * processes".
 *
 *   npm run overload -- [--capacity 4:20] [--load 3] [--seconds 10] [--share 0.05] [--fast-first] [--only shed|none]
 *   npm run overload -- --mix [--capacity 32:20] [--lanes 128] [--share 0.05] [--only adaptive|gradient2]
 *
 * For each configuration it starts `npm run serve -- --capacity <c>:<ms> [--shed adaptive]`, measures the
 * unloaded p99 (requests one after another), offers `load × capacity` requests per second for `seconds`
 * (open loop: a fixed number of requests on a fixed schedule, whatever the answers), and prints one row:
 * goodput (created orders per second, and as a share of capacity), the p99 latency of the created orders next
 * to the unloaded p99, and how many requests were refused or got no answer. `--share` sends that share of the
 * requests without an `Idempotency-Key` (a fast 400), `--fast-first` one such request before the load. With
 * --json the last line is `{ "capacity": …, "rows": [...] }`.
 *
 * `--mix` asks another question: whether shedding still admits what the resource can do when some answers are
 * fast (examples/overload/mix.ts): a closed loop of `lanes` callers (default 4 × concurrency), with and without
 * fast answers, the middleware's default algorithm next to Gradient2.
 */
import { parseArgs } from "node:util"
import { startServe } from "./faults/support.js"
import { fastAnswer, fixed, offer, summarize, type Summary, table, unloaded } from "./overload/loadgen.js"
import { formatMixRows, measureMix, type MixRow, scenarios } from "./overload/mix.js"
import { percentile } from "./support/percentile.js"

export interface Row extends Summary {
  readonly shed: boolean
  /** Goodput as a share of capacity. */
  readonly goodputShare: number
  readonly unloadedP99Ms: number
  /** p99 of the created orders over the unloaded p99. */
  readonly p99Ratio: number
  /** The same after the shedder's first 2 s of load (`learnMs`). */
  readonly steadyP99Ratio: number
}

export interface RunOptions {
  readonly concurrency: number
  readonly serviceMillis: number
  /** Offered load as a multiple of capacity. */
  readonly load: number
  readonly seconds: number
  /** How long a caller waits for an answer before it gives up. */
  readonly timeoutMs?: number
  /** Fast answers (a `POST /orders` without an `Idempotency-Key`: a 400): this share of the load, and/or one first. */
  readonly fastShare?: number
  readonly fastFirst?: boolean
}

/** Capacity in requests per second. */
export const capacityOf = (o: RunOptions): number => o.concurrency * 1000 / o.serviceMillis

/** Starts one serve process, measures it unloaded then under load, stops it. */
export const measure = async (options: RunOptions, shed: boolean): Promise<Row> => {
  const server = await startServe([
    "--capacity",
    `${options.concurrency}:${options.serviceMillis}`,
    // a quota the load cannot reach: this measures shedding, not the rate limit
    "--rate",
    "100000:100000",
    ...(shed ? ["--shed", "adaptive"] : [])
  ])
  try {
    const timeoutMs = options.timeoutMs ?? 5000
    await unloaded(server.url, 50, timeoutMs) // warm up: JIT, connections
    const quiet = await unloaded(server.url, 200, timeoutMs)
    const unloadedP99Ms = percentile(quiet.map((o) => o.latencyMs), 0.99) ?? NaN
    const capacity = capacityOf(options)
    const rate = options.load * capacity
    if (options.fastFirst === true) await fastAnswer(server.url, timeoutMs)
    const fastShare = options.fastShare ?? 0
    const summary = summarize(await offer(server.url, { rate, seconds: options.seconds, timeoutMs, fastShare }), rate)
    return {
      ...summary,
      shed,
      goodputShare: summary.goodput / capacity,
      unloadedP99Ms,
      p99Ratio: summary.p99Ms / unloadedP99Ms,
      steadyP99Ratio: summary.steadyP99Ms / unloadedP99Ms
    }
  } finally {
    await server.stop()
  }
}

export const formatRows = (rows: ReadonlyArray<Row>, capacity: number): string => {
  const header = [
    "shedding",
    "offered/s",
    "goodput/s",
    "of capacity",
    "p99 ms",
    "unloaded p99",
    "ratio",
    "refused",
    "no answer"
  ]
  const lines = rows.map((r) => [
    r.shed ? "adaptive" : "none",
    fixed(r.offered, 0),
    fixed(r.goodput, 1),
    `${fixed(r.goodputShare * 100, 1)} %`,
    fixed(r.p99Ms, 1),
    fixed(r.unloadedP99Ms, 1),
    `${fixed(r.p99Ratio, 2)}×`,
    String(r.refused),
    String(r.failed)
  ])
  return [`capacity ${fixed(capacity, 0)} requests/s`, ...table(header, lines)].join("\n")
}

const main = async () => {
  const { values } = parseArgs({
    options: {
      capacity: { type: "string", default: "4:20" },
      load: { type: "string", default: "3" },
      seconds: { type: "string", default: "10" },
      only: { type: "string" },
      mix: { type: "boolean", default: false },
      lanes: { type: "string" },
      share: { type: "string" },
      "fast-first": { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      help: { type: "boolean", default: false }
    }
  })
  const usage = "usage: npm run overload -- [--capacity <concurrency>:<ms>] [--load <multiple>] [--seconds <s>] " +
    "[--share <fast share>] [--fast-first] [--only shed|none] [--json]\n" +
    "       npm run overload -- --mix [--capacity <concurrency>:<ms>] [--lanes <callers>] [--share <fast share>] " +
    "[--seconds <s>] [--only adaptive|gradient2] [--json]"
  if (values.help) return console.log(usage)
  const match = /^(\d{1,4}):(\d{1,6})$/.exec(values.capacity)
  const load = Number(values.load)
  const seconds = Number(values.seconds)
  if (match === null || Number(match[1]) < 1 || Number(match[2]) < 1) throw new Error(`bad --capacity\n${usage}`)
  if (!(load > 0 && load <= 20)) throw new Error(`bad --load, expected a number in (0, 20]\n${usage}`)
  if (!(seconds > 0 && seconds <= 120)) throw new Error(`bad --seconds, expected a number in (0, 120]\n${usage}`)
  const concurrency = Number(match[1])
  const serviceMillis = Number(match[2])
  if (values.mix) return mix(values, { concurrency, serviceMillis, seconds }, usage)
  if (values.only !== undefined && values.only !== "shed" && values.only !== "none") {
    throw new Error(`bad --only, expected shed or none\n${usage}`)
  }
  const fastShare = Number(values.share ?? 0)
  if (!(fastShare >= 0 && fastShare < 1)) throw new Error(`bad --share, expected a number in [0, 1)\n${usage}`)
  const options: RunOptions = { concurrency, serviceMillis, load, seconds, fastShare, fastFirst: values["fast-first"] }
  const rows: Array<Row> = []
  for (const shed of [true, false]) {
    if (values.only === (shed ? "none" : "shed")) continue
    rows.push(await measure(options, shed))
  }
  const capacity = capacityOf(options)
  if (fastShare > 0 || options.fastFirst === true) {
    console.log(
      `fast answers (400s): ${fastShare * 100} % of the load${options.fastFirst === true ? ", and one first" : ""}`
    )
  }
  console.log(formatRows(rows, capacity))
  if (values.json) console.log(JSON.stringify({ capacity, rows }))
}

/** `--mix`: each algorithm, each scenario of examples/overload/mix.ts, on a fresh server. */
const mix = async (
  values: { readonly lanes?: string; readonly share?: string; readonly only?: string; readonly json: boolean },
  base: { readonly concurrency: number; readonly serviceMillis: number; readonly seconds: number },
  usage: string
) => {
  const lanes = values.lanes === undefined ? 4 * base.concurrency : Number(values.lanes)
  const fastShare = Number(values.share ?? 0.05)
  if (!(Number.isInteger(lanes) && lanes >= 1 && lanes <= 2000)) throw new Error(`bad --lanes\n${usage}`)
  if (!(fastShare > 0 && fastShare < 1)) throw new Error(`bad --share, expected a number in (0, 1)\n${usage}`)
  if (values.only !== undefined && values.only !== "adaptive" && values.only !== "gradient2") {
    throw new Error(`bad --only, expected adaptive or gradient2 with --mix\n${usage}`)
  }
  const options = { ...base, lanes, fastShare }
  const rows: Array<MixRow> = []
  for (const algorithm of ["adaptive", "gradient2"] as const) {
    if (values.only !== undefined && values.only !== algorithm) continue
    for (const scenario of scenarios) rows.push(await measureMix(options, algorithm, scenario))
  }
  console.log(formatMixRows(rows, options))
  if (values.json) console.log(JSON.stringify({ ...options, rows }))
}

/**
 * Runs `npm run overload`'s command line; a bad option prints its message and exits 2. Both editions' (the
 * Effect 4 edition's packages/effect4/examples/overload.ts picks its serve program first).
 */
export const cli = (): void => {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error)
    process.exit(2)
  })
}

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"))) cli()
