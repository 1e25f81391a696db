/** What a storm sweep writes: results.csv, the two charts, the table, the target checks and the JSON line. */
import { formatNumber, lineChart, type Series } from "../../packages/effect3/examples/simulate/chart.js"
import { type Cell, policies, type Policy, type Row } from "./figures.js"
import { capacityOf, type Scenario } from "./model.js"

/** Okabe–Ito colours; the policies without server admission are dashed. */
const styles: Record<Policy, { readonly color: string; readonly dash?: string }> = {
  naive: { color: "#D55E00", dash: "10 4" },
  jitter: { color: "#E69F00", dash: "5 5" },
  budget: { color: "#CC79A7", dash: "2 3" },
  throttle: { color: "#009E73", dash: "8 3 2 3" },
  full: { color: "#0072B2" }
}

const cell = (x: number | null, digits: number) => x === null ? "" : x.toFixed(digits)

export const toCsv = (rows: ReadonlyArray<Row>): string =>
  [
    "policy,offered,goodput,amplification,p99Ms,recoverySeconds",
    ...rows.map((r) =>
      [
        r.policy,
        cell(r.offered, 2),
        cell(r.goodput, 2),
        cell(r.amplification, 3),
        cell(r.p99Ms, 1),
        cell(
          r.recoverySeconds,
          1
        )
      ].join(",")
    )
  ].join("\n") + "\n"

/** The line `npm run storm -- --json` ends with. */
export const toJson = (scenario: Scenario, rows: ReadonlyArray<Row>): string =>
  JSON.stringify({ capacity: capacityOf(scenario), rows })

const subtitle = (scenario: Scenario) =>
  `one server: ${scenario.concurrency} workers × ${scenario.serviceMs} ms = ${capacityOf(scenario)} requests/s; ` +
  `${scenario.clients} clients; capacity cut to ${scenario.triggerFactor * 100} % from ` +
  `${scenario.triggerStartMs / 1_000} s to ${scenario.triggerEndMs / 1_000} s`

export const goodputChart = (scenario: Scenario, rows: ReadonlyArray<Row>): string => {
  const capacity = capacityOf(scenario)
  const series: Array<Series> = policies.map((policy) => ({
    label: policy,
    ...styles[policy],
    points: rows.filter((r) => r.policy === policy).map((r) => [r.offered / capacity, r.goodput / capacity] as const)
  }))
  return lineChart({
    title: "Goodput outside the trigger, by offered load",
    subtitle: subtitle(scenario),
    xLabel: "offered load (× capacity)",
    yLabel: "goodput (× capacity)",
    series
  })
}

export const timelineChart = (scenario: Scenario, cells: ReadonlyArray<Cell>, load: number): string => {
  const capacity = capacityOf(scenario)
  const series: Array<Series> = policies.flatMap((policy) => {
    const found = cells.find((c) => c.row.policy === policy && c.row.offered === load * capacity)
    if (found === undefined) return []
    return [{
      label: policy,
      ...styles[policy],
      points: found.timeline.map((g, i) => [(i + 1) * scenario.bucketMs / 1_000, g] as const)
    }]
  })
  return lineChart({
    title: `Goodput over time at ${load}× capacity (${formatNumber(load * capacity)} requests/s offered)`,
    subtitle: subtitle(scenario),
    xLabel: "time (s), each point the second ending there",
    yLabel: "successful requests/s",
    series
  })
}

export const table = (scenario: Scenario, rows: ReadonlyArray<Row>): string => {
  const capacity = capacityOf(scenario)
  const head = ["policy", "offered", "load", "goodput", "% cap", "ampl.", "p99 ms", "recovery s"]
  const body = rows.map((r) => [
    r.policy,
    r.offered.toFixed(1),
    `${(r.offered / capacity).toFixed(1)}×`,
    r.goodput.toFixed(2),
    `${(100 * r.goodput / capacity).toFixed(0)} %`,
    r.amplification.toFixed(2),
    r.p99Ms === null ? "-" : r.p99Ms.toFixed(0),
    r.recoverySeconds === null ? "never" : r.recoverySeconds.toFixed(0)
  ])
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ")
  return [line(head), ...body.map(line)].join("\n")
}

/** The targets, each with the figure it was judged on. */
export const checks = (scenario: Scenario, cells: ReadonlyArray<Cell>): ReadonlyArray<string> => {
  const capacity = capacityOf(scenario)
  const end = scenario.triggerEndMs / scenario.bucketMs
  const load = (c: Cell) => c.row.offered / capacity
  const mark = (ok: boolean) => ok ? "ok  " : "MISS"
  const out: Array<string> = []
  for (const c of cells.filter((c) => c.row.policy === "full" && load(c) >= 1)) {
    out.push(
      `${mark(c.row.goodput >= 0.9 * capacity)} full at ${load(c)}×: goodput ${c.row.goodput} >= ${0.9 * capacity}`
    )
  }
  for (const c of cells.filter((c) => c.row.policy === "full" && load(c) === 3)) {
    out.push(`${mark(c.row.amplification <= 1.1)} full at 3×: amplification ${c.row.amplification} <= 1.1`)
  }
  for (const c of cells.filter((c) => c.row.policy === "naive" && load(c) >= 1.5)) {
    const best = Math.max(...c.timeline.slice(end))
    out.push(
      `${mark(best < 0.5 * capacity)} naive at ${load(c)}×: best second after the trigger ${best} < ${0.5 * capacity}`
    )
  }
  for (const c of cells.filter((c) => c.row.policy === "full" && load(c) >= 1.5)) {
    const r = c.row.recoverySeconds
    out.push(`${mark(r !== null && r <= 5)} full at ${load(c)}×: back above 90 % after ${r ?? "never"} s <= 5`)
  }
  return out
}
