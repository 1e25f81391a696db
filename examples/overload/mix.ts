/**
 * `npm run overload -- --mix`: does load shedding still admit what the resource can do when some answers are fast?
 * A closed loop of callers against `npm run serve -- --shed adaptive|gradient2 --capacity <c>:<ms>`, three ways
 * per algorithm, each on a fresh server: only orders; ONE fast answer (a `POST /orders` without an
 * `Idempotency-Key`, a 400 in well under a millisecond) before the orders; and a share of fast answers mixed in.
 * Each row: orders created and requests refused per second, the fast answers per second, the p99 of the created
 * orders, and the limit the shedder reached (from the `shed limit <n>` lines serve prints).
 */
import { startServe } from "../faults/support.js"
import { percentile } from "../support/percentile.js"
import { shedLimits } from "./limitLines.js"
import { closedLoop, fastAnswer, fixed, table, unloaded } from "./loadgen.js"

export type Scenario = "orders only" | "one fast first" | "fast mixed in"
export type ShedAlgorithm = "adaptive" | "gradient2"

export interface MixOptions {
  readonly concurrency: number
  readonly serviceMillis: number
  readonly lanes: number
  readonly seconds: number
  /** The share of fast answers in "fast mixed in". */
  readonly fastShare: number
}

export interface MixRow {
  readonly algorithm: ShedAlgorithm
  readonly scenario: Scenario
  /** Created orders (201) per second. */
  readonly ordersPerSecond: number
  /** Refused (503) per second. */
  readonly refusedPerSecond: number
  /** Fast answers (400) per second. */
  readonly fastPerSecond: number
  /** No answer within the timeout, or a network error. */
  readonly failed: number
  readonly p99Ms: number
  /** The limit over the run's second half: its median (by time) and its range. */
  readonly limit: number
  readonly limitMin: number
  readonly limitMax: number
}

/** The time-weighted limit over [from, to] from `(at, limit)` changes, the first of them before `from`. */
const limitsOver = (changes: ReadonlyArray<readonly [number, number]>, from: number, to: number) => {
  let current = NaN
  const spans: Array<readonly [number, number]> = [] // [limit, duration]
  let at = from
  for (const [time, limit] of changes) {
    if (time <= from) {
      current = limit
      continue
    }
    if (time >= to) break
    if (!Number.isNaN(current)) spans.push([current, time - at])
    current = limit
    at = time
  }
  if (!Number.isNaN(current)) spans.push([current, to - at])
  const total = spans.reduce((sum, [, d]) => sum + d, 0)
  const sorted = [...spans].sort((a, b) => a[0] - b[0])
  let seen = 0
  const median = sorted.find(([, d]) => (seen += d) >= total / 2)?.[0] ?? NaN
  const values = spans.map(([l]) => l)
  return { median, min: Math.min(...values), max: Math.max(...values) }
}

export const measureMix = async (
  options: MixOptions,
  algorithm: ShedAlgorithm,
  scenario: Scenario
): Promise<MixRow> => {
  const server = await startServe([
    "--capacity",
    `${options.concurrency}:${options.serviceMillis}`,
    "--rate",
    "100000:100000",
    "--shed",
    algorithm
  ])
  // the limit as it moves, stamped on arrival: serve prints a line each time it changed
  // (the lines before it was ready, the limit it started from among them, are in its output so far)
  const changes: Array<readonly [number, number]> = shedLimits(server.output()).slice(-1).map((l) => [0, l])
  let partial = ""
  server.child.stdout!.on("data", (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split("\n")
    partial = lines.pop()! // a line the next chunk ends
    for (const limit of shedLimits(lines.join("\n"))) changes.push([performance.now(), limit])
  })
  try {
    const timeoutMs = 5000
    await unloaded(server.url, 50, timeoutMs) // warm up: JIT, connections
    if (scenario === "one fast first") await fastAnswer(server.url, timeoutMs)
    const start = performance.now()
    const outcomes = await closedLoop(server.url, {
      lanes: options.lanes,
      seconds: options.seconds,
      timeoutMs,
      fastShare: scenario === "fast mixed in" ? options.fastShare : 0
    })
    const end = performance.now()
    const span = (end - start) / 1000
    const count = (status: number) => outcomes.filter((o) => o.status === status).length
    const limits = limitsOver(changes, start + (end - start) / 2, end)
    return {
      algorithm,
      scenario,
      ordersPerSecond: count(201) / span,
      refusedPerSecond: count(503) / span,
      fastPerSecond: count(400) / span,
      failed: count(0),
      p99Ms: percentile(outcomes.filter((o) => o.status === 201).map((o) => o.latencyMs), 0.99) ?? NaN,
      limit: limits.median,
      limitMin: limits.min,
      limitMax: limits.max
    }
  } finally {
    await server.stop()
  }
}

export const scenarios: ReadonlyArray<Scenario> = ["orders only", "one fast first", "fast mixed in"]

export const formatMixRows = (rows: ReadonlyArray<MixRow>, options: MixOptions): string => {
  const capacity = options.concurrency * 1000 / options.serviceMillis
  const header = ["shedding", "scenario", "orders/s", "refused/s", "fast/s", "p99 ms", "limit", "limit range", "failed"]
  const lines = rows.map((r) => [
    r.algorithm,
    r.scenario,
    fixed(r.ordersPerSecond, 0),
    fixed(r.refusedPerSecond, 0),
    fixed(r.fastPerSecond, 0),
    fixed(r.p99Ms, 1),
    fixed(r.limit, 0),
    `${fixed(r.limitMin, 0)}–${fixed(r.limitMax, 0)}`,
    String(r.failed)
  ])
  return [
    `capacity ${fixed(capacity, 0)} orders/s (${options.concurrency}:${options.serviceMillis}), ` +
    `${options.lanes} callers in a closed loop, ${options.seconds} s; mixed in: ${options.fastShare * 100} % fast`,
    ...table(header, lines)
  ].join("\n")
}
