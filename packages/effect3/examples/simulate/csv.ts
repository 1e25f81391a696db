/**
 * `results.csv`: one row per (client count, algorithm), means over the runs. Numbers are written with a
 * fixed number of decimals so the same seed gives a byte-identical file.
 */
import type { Row } from "./sweep.js"

export const header = "clients,algorithm,time_ms,calls"

export const toCsv = (rows: ReadonlyArray<Row>): string =>
  [header, ...rows.map((r) => `${r.clients},${r.algorithm},${r.timeMs.toFixed(2)},${r.calls.toFixed(2)}`)]
    .join("\n") + "\n"
