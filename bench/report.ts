/**
 * What both editions' benches share, Effect-free (plain TypeScript, like the root's `examples/`): the command line
 * (`--json`, `--check`, `--only`), the cases' figures, the ratios against their baselines with their targets, and
 * the output — a table, or with `--json` one JSON document and nothing else.
 *
 * A case is a figure: `nsPerOp`, time per operation (a call, a decision, a message, a request), printed as
 * operations per second. A comparison judges one case against its baseline by a ratio the suite computes, since
 * how a ratio is fairly taken depends on the case (the median of per-round ratios, the overhead over a floor, ...):
 *
 * - `throughput`: the case's operations per second ÷ the baseline's (the target is "at least");
 * - `time`: the case's time per operation ÷ the baseline's (the target is "at most");
 * - `overhead`: (case − floor) ÷ (baseline − floor), the floor being `Effect.succeed` (the target is "at most").
 *
 * Benchmarks are not tests: a run exits non-zero on a missed target only with `--check`.
 */

export interface Flags {
  readonly json: boolean
  readonly check: boolean
  /** `--only core,redis`: the suites to run, all when undefined */
  readonly only: ReadonlyArray<string> | undefined
}

export const flags = (argv: ReadonlyArray<string> = process.argv.slice(2)): Flags => {
  const only = argv.indexOf("--only")
  return {
    json: argv.includes("--json"),
    check: argv.includes("--check"),
    only: only === -1 ? undefined : (argv[only + 1] ?? "").split(",").filter((s) => s.length > 0)
  }
}

/** The value of `--<name> <value>` on the command line, or `fallback`. */
export const option = (name: string, fallback: string, argv: ReadonlyArray<string> = process.argv.slice(2)): string => {
  const i = argv.indexOf(`--${name}`)
  return i === -1 ? fallback : argv[i + 1] ?? fallback
}

export type RatioKind = "throughput" | "time" | "overhead"

export interface Target {
  readonly atLeast?: number
  readonly atMost?: number
}

export interface Comparison {
  readonly case: string
  readonly baseline: string
  readonly kind: RatioKind
  readonly ratio: number
  readonly target?: Target
  /** why the ratio is taken this way, or what bounds it (printed under it) */
  readonly note?: string
}

/** What one suite measured: its figures, its judged (or only reported) ratios, and lines for the table output. */
export interface SuiteResult {
  readonly cases: Record<string, number>
  readonly comparisons?: ReadonlyArray<Comparison>
  readonly notes?: ReadonlyArray<string>
  /** more lines for the table output, printed after the suite's own (not with `--json`) */
  readonly print?: () => Promise<void>
}

export interface Suite {
  readonly name: string
  /** `floor`: the `Effect.succeed` baseline's ns/op when the run measured it (for overhead ratios) */
  readonly run: (context: { readonly floor: number | undefined }) => Promise<SuiteResult>
}

/** The target met, or undefined when the comparison has none (reported, not judged). */
export const pass = (c: Comparison): boolean | undefined => {
  if (c.target === undefined) return undefined
  if (!Number.isFinite(c.ratio)) return false
  return (c.target.atLeast === undefined || c.ratio >= c.target.atLeast) &&
    (c.target.atMost === undefined || c.ratio <= c.target.atMost)
}

/** `case ÷ baseline` as the kind says, from the cases' ns/op (`floor` for overheads). */
export const ratioOf = (
  kind: RatioKind,
  caseNs: number,
  baselineNs: number,
  floor = 0
): number =>
  kind === "throughput"
    ? baselineNs / caseNs
    : kind === "time"
    ? caseNs / baselineNs
    : Math.max(0, caseNs - floor) / Math.max(1, baselineNs - floor)

/** A comparison of two cases of `cases` by the ratio `kind` says; undefined when either is missing. */
export const compare = (
  cases: Record<string, number>,
  name: string,
  baseline: string,
  kind: RatioKind,
  target?: Target,
  floor?: number
): Comparison | undefined => {
  const a = cases[name]
  const b = cases[baseline]
  if (a === undefined || b === undefined) return undefined
  return { case: name, baseline, kind, ratio: ratioOf(kind, a, b, floor), ...(target === undefined ? {} : { target }) }
}

export const median = (xs: ReadonlyArray<number>): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length === 0 ? NaN : sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export const opsPerSecond = (nsPerOp: number): number => 1e9 / nsPerOp

const rate = (nsPerOp: number): string => {
  const ops = opsPerSecond(nsPerOp)
  return ops >= 1e6
    ? `${(ops / 1e6).toFixed(2)}M/s`
    : ops >= 1e4
    ? `${(ops / 1e3).toFixed(1)}k/s`
    : `${ops.toFixed(0)}/s`
}
const time = (ns: number): string =>
  ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e4 ? `${(ns / 1e3).toFixed(1)} µs` : `${ns.toFixed(0)} ns`

const targetText = (kind: RatioKind, target: Target | undefined): string => {
  if (target === undefined) return "reported, not judged"
  const bounds = [
    target.atLeast === undefined ? [] : [`≥ ${target.atLeast}×`],
    target.atMost === undefined ? [] : [`≤ ${target.atMost}×`]
  ].flat()
  return `target ${bounds.join(" and ")} (${kind})`
}

export interface JsonCase {
  readonly name: string
  readonly suite: string
  readonly nsPerOp: number
  readonly opsPerSecond: number
  readonly baseline: string | null
  readonly baselineOpsPerSecond: number | null
  readonly ratioKind: RatioKind | null
  readonly ratio: number | null
  readonly target: Target | null
  readonly pass: boolean | null
}

export interface Run {
  readonly edition: string
  readonly flags: Flags
  readonly suites: ReadonlyArray<Suite>
  /** measured first, whatever `--only` picked: the floor of the overhead ratios (the `Effect.succeed` case) */
  readonly floor?: Suite
}

/**
 * Runs the suites in order and prints as it goes (not with `--json`: then one document at the end). Sets
 * `process.exitCode` to 1 when a target is missed and `--check` was given.
 */
export const run = async ({ edition, flags: f, floor: floorSuite, suites }: Run): Promise<void> => {
  const known = suites.map((s) => s.name)
  for (const name of f.only ?? []) {
    if (!known.includes(name)) throw new Error(`no bench suite "${name}": ${known.join(", ")}`)
  }
  const picked = suites.filter((s) => f.only === undefined || f.only.includes(s.name))
  const log = (line = "") => {
    if (!f.json) console.log(line)
  }
  const started = new Date().toISOString()
  log(`effect-resilience ${edition} bench, Node ${process.version}, ${started}`)
  const all: Array<JsonCase> = []
  const missed: Array<string> = []
  let floor: number | undefined
  const suiteRuns = floorSuite !== undefined && !picked.some((s) => s.name === floorSuite.name)
    ? [{ suite: floorSuite, hidden: true }, ...picked.map((suite) => ({ suite, hidden: false }))]
    : picked.map((suite) => ({ suite, hidden: false }))
  for (const { hidden, suite } of suiteRuns) {
    const result = await suite.run({ floor })
    if (floorSuite !== undefined && suite.name === floorSuite.name) {
      floor = Object.entries(result.cases).find(([name]) => name.startsWith("Effect.succeed"))?.[1]
    }
    if (hidden) continue
    log(`\n${suite.name}`)
    for (const [name, ns] of Object.entries(result.cases)) {
      log(`  ${name.padEnd(58)} ${rate(ns).padStart(10)} ${time(ns).padStart(10)}/op`)
    }
    const comparisons = result.comparisons ?? []
    if (comparisons.length > 0) log("  ratios:")
    for (const c of comparisons) {
      const ok = pass(c)
      if (ok === false) missed.push(`${c.case} / ${c.baseline}`)
      const verdict = ok === undefined ? "" : ok ? "  ok" : "  MISSED"
      log(
        `  ${`${c.case} / ${c.baseline}`.padEnd(86)} ${c.ratio.toFixed(3)}×  ${targetText(c.kind, c.target)}${verdict}`
      )
      if (c.note !== undefined) log(`      ${c.note}`)
    }
    for (const note of result.notes ?? []) log(`  note: ${note}`)
    if (!f.json) await result.print?.()
    const judged = new Map<string, Comparison>()
    for (const c of comparisons) if (!judged.has(c.case) || c.target !== undefined) judged.set(c.case, c)
    for (const [name, ns] of Object.entries(result.cases)) {
      const c = judged.get(name)
      const baselineNs = c === undefined ? undefined : result.cases[c.baseline]
      all.push({
        name,
        suite: suite.name,
        nsPerOp: ns,
        opsPerSecond: opsPerSecond(ns),
        baseline: c?.baseline ?? null,
        baselineOpsPerSecond: baselineNs === undefined ? null : opsPerSecond(baselineNs),
        ratioKind: c?.kind ?? null,
        ratio: c?.ratio ?? null,
        target: c?.target ?? null,
        pass: c === undefined ? null : pass(c) ?? null
      })
    }
  }
  if (f.json) {
    console.log(JSON.stringify({ edition, node: process.version, started, cases: all, missed }, null, 2))
  } else {
    log(missed.length === 0 ? "\nevery judged ratio met its target" : `\nmissed: ${missed.join("; ")}`)
  }
  if (f.check && missed.length > 0) process.exitCode = 1
}
