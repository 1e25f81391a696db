/** What a sweep produces besides the CSV: the two charts and the summary table for the terminal. */
import type { Algorithm } from "./backoff.js"
import { formatNumber, lineChart, type Series } from "./chart.js"
import type { Row } from "./sweep.js"

/**
 * Legend labels and colours (Okabe–Ito, readable with colour-blindness). The no-jitter lines are dotted
 * and dashed; equal jitter is dashed too because it lies almost on top of full jitter in the calls chart.
 */
export const styles: Record<Algorithm, { readonly label: string; readonly color: string; readonly dash?: string }> = {
  none: { label: "no backoff", color: "#555555", dash: "2 3" },
  exponential: { label: "exponential, no jitter", color: "#D55E00", dash: "10 4" },
  full: { label: "full jitter", color: "#0072B2" },
  equal: { label: "equal jitter", color: "#E69F00", dash: "5 5" },
  decorrelated: { label: "decorrelated jitter", color: "#009E73" }
}

export interface SweepInfo {
  readonly runs: number
  readonly seed: string
}

const algorithmsIn = (rows: ReadonlyArray<Row>): ReadonlyArray<Algorithm> => [...new Set(rows.map((r) => r.algorithm))]

const seriesOf = (rows: ReadonlyArray<Row>, y: (row: Row) => number): ReadonlyArray<Series> =>
  algorithmsIn(rows).map((algorithm) => ({
    ...styles[algorithm],
    points: rows.filter((r) => r.algorithm === algorithm).map((r) => [r.clients, y(r)] as const)
  }))

const subtitle = (info: SweepInfo) =>
  `mean of ${info.runs} run${info.runs === 1 ? "" : "s"} per point · backoff base 5 ms, cap 2 s · ` +
  `network hops |N(10, 2)| ms · seed ${info.seed}`

/** Total write calls (the post's "client work") against the number of contending clients. */
export const callsChart = (rows: ReadonlyArray<Row>, info: SweepInfo): string =>
  lineChart({
    title: "Client work: write calls until every client has written once",
    subtitle: subtitle(info),
    xLabel: "contending clients",
    yLabel: "write calls per run (mean)",
    series: seriesOf(rows, (r) => r.calls)
  })

/** Completion time against clients, on a log axis: without jitter it is ten times the others. */
export const timeChart = (rows: ReadonlyArray<Row>, info: SweepInfo): string =>
  lineChart({
    title: "Completion time: until the last client's write succeeds",
    subtitle: subtitle(info),
    xLabel: "contending clients",
    yLabel: "completion time per run, seconds (mean, log scale)",
    yScale: "log",
    series: seriesOf(rows, (r) => r.timeMs / 1000)
  })

/** Up to `count` client counts spread over the sweep, always including the first and the last. */
export const sampleCounts = (counts: ReadonlyArray<number>, count = 4): ReadonlyArray<number> => {
  if (counts.length <= count) return counts
  return [
    ...new Set(Array.from({ length: count }, (_, i) => counts[Math.round((i * (counts.length - 1)) / (count - 1))]!))
  ]
}

/** Two aligned tables (write calls, completion time) with one line per algorithm. */
export const summary = (rows: ReadonlyArray<Row>): string => {
  const counts = sampleCounts([...new Set(rows.map((r) => r.clients))])
  const algorithms = algorithmsIn(rows)
  const cell = (clients: number, algorithm: Algorithm) =>
    rows.find((r) => r.clients === clients && r.algorithm === algorithm)
  const labelWidth = Math.max(...algorithms.map((a) => styles[a].label.length), 24)
  const table = (title: string, value: (row: Row) => string) => {
    const head = title.padEnd(labelWidth) + counts.map((c) => `${c} clients`.padStart(13)).join("")
    const lines = algorithms.map((a) =>
      styles[a].label.padEnd(labelWidth) +
      counts.map((c) => {
        const row = cell(c, a)
        return (row === undefined ? "-" : value(row)).padStart(13)
      }).join("")
    )
    return [head, "-".repeat(head.length), ...lines].join("\n")
  }
  return [
    table("write calls (mean)", (r) => formatNumber(Math.round(r.calls))),
    "",
    table("completion time (mean)", (r) => `${formatNumber(Math.round(r.timeMs))} ms`)
  ].join("\n")
}
