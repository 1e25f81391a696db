/**
 * The storm's plain parts, shared by both editions' `npm run storm`: the policies' names, what a run counts, and
 * the figures of a cell taken from those counts. No Effect here.
 */
import { percentile } from "../support/percentile.js"
import { capacityOf, type Scenario } from "./model.js"

export const policies = ["naive", "jitter", "budget", "throttle", "full"] as const
export type Policy = (typeof policies)[number]

/** What one run counts. */
export interface Stats {
  /** Logical requests started, and attempts that reached the server. */
  logical: number
  attempts: number
  successes: number
  /** Milliseconds from a logical request's start to its success, retries included. */
  readonly latencies: Array<number>
  /** Successes by completion time, per `bucketMs`. */
  readonly buckets: Array<number>
}

export const emptyStats = (scenario: Scenario): Stats => ({
  logical: 0,
  attempts: 0,
  successes: 0,
  latencies: [],
  buckets: Array.from({ length: Math.ceil(scenario.durationMs / scenario.bucketMs) }, () => 0)
})

export interface Row {
  readonly policy: Policy
  /** Logical requests per second, all clients together. */
  readonly offered: number
  /** Successful logical requests per second while the server had its full capacity (outside the trigger). */
  readonly goodput: number
  /** Attempts that reached the server per logical request. */
  readonly amplification: number
  /** The 99th percentile of successful requests' latency, retries included; null without a success. */
  readonly p99Ms: number | null
  /** From the trigger's end to the end of the first bucket with goodput >= 90 % of capacity; null if none. */
  readonly recoverySeconds: number | null
}

export interface Cell {
  readonly row: Row
  /** Successes per second, bucket by bucket over the run. */
  readonly timeline: ReadonlyArray<number>
}

/** The seed of a cell depends on the run's seed, the policy and the load, not on which thread runs it. */
export const cellSeed = (seed: number, policy: Policy, load: number): number => {
  let h = (seed ^ 0x9e3779b9) >>> 0
  for (const ch of `${policy}/${load}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0
  return h
}

const round = (x: number, digits: number) => Number(x.toFixed(digits))

/** The figures of `policy` at `offered` requests per second, from what its run counted. */
export const figures = (scenario: Scenario, policy: Policy, offered: number, stats: Stats): Cell => {
  const capacity = capacityOf(scenario)
  const perSecond = 1_000 / scenario.bucketMs
  const timeline = stats.buckets.map((n) => n * perSecond)
  const first = scenario.triggerStartMs / scenario.bucketMs
  const last = scenario.triggerEndMs / scenario.bucketMs
  const outside = stats.buckets.filter((_, i) => i < first || i >= last)
  const goodput = outside.reduce((a, b) => a + b, 0) / (outside.length * scenario.bucketMs / 1_000)
  const back = timeline.findIndex((g, i) => i >= last && g >= 0.9 * capacity)
  const row: Row = {
    policy,
    offered: round(offered, 3),
    goodput: round(goodput, 3),
    amplification: round(stats.logical === 0 ? 0 : stats.attempts / stats.logical, 4),
    p99Ms: percentile(stats.latencies, 0.99),
    recoverySeconds: back < 0 ? null : round((back + 1 - last) * scenario.bucketMs / 1_000, 3)
  }
  return { row, timeline }
}
