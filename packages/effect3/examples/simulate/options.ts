/** Parsing of the simulator's command-line values, kept apart from the CLI so it can be tested. */
import { type Algorithm, algorithms, isAlgorithm } from "./backoff.js"

const positiveInt = (text: string, what: string): number => {
  const n = Number(text)
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new Error(`${what}: expected a positive integer, got "${text}"`)
  }
  return n
}

/**
 * Client counts: a comma-separated list of counts and ranges. A range `from..to:step` includes both ends
 * when `to` is on the step (`10..190:10` is 10, 20, …, 190); without `:step` the step is 1. Duplicates
 * are dropped and the result is sorted.
 */
export const parseClients = (spec: string): ReadonlyArray<number> => {
  const counts = new Set<number>()
  for (const part of spec.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const range = /^(\d+)\.\.(\d+)(?::(\d+))?$/.exec(part)
    if (range === null) {
      counts.add(positiveInt(part, "--clients"))
      continue
    }
    const from = positiveInt(range[1]!, "--clients")
    const to = positiveInt(range[2]!, "--clients")
    const step = range[3] === undefined ? 1 : positiveInt(range[3], "--clients step")
    if (to < from) throw new Error(`--clients: empty range "${part}"`)
    for (let n = from; n <= to; n += step) counts.add(n)
  }
  if (counts.size === 0) throw new Error(`--clients: no client counts in "${spec}"`)
  return [...counts].sort((a, b) => a - b)
}

/** A comma-separated subset of the algorithms, kept in the canonical order (`all` for every one). */
export const parseAlgorithms = (spec: string): ReadonlyArray<Algorithm> => {
  const names = spec.split(",").map((s) => s.trim()).filter((s) => s !== "")
  if (names.length === 1 && names[0] === "all") return algorithms
  for (const name of names) {
    if (!isAlgorithm(name)) throw new Error(`--algorithms: unknown "${name}" (one of ${algorithms.join(", ")})`)
  }
  if (names.length === 0) throw new Error("--algorithms: none given")
  return algorithms.filter((a) => names.includes(a))
}

export const parseRuns = (text: string): number => positiveInt(text, "--runs")
