/**
 * The check every fault test makes of its rows (examples/faults/*): at least one row, each with something
 * offered, nothing lost, nothing duplicated and its bound kept — the row's notes shown when one is not.
 */
import { expect } from "@effect/vitest"
import type { FaultRow } from "../../../../examples/faults/fault.js"

export const survived = (rows: ReadonlyArray<FaultRow>): ReadonlyArray<FaultRow> => {
  expect(rows.length).toBeGreaterThan(0)
  for (const row of rows) {
    expect({ fault: row.fault, lost: row.lost, duplicated: row.duplicated, ok: row.ok, notes: row.notes }).toEqual({
      fault: row.fault,
      lost: 0,
      duplicated: 0,
      ok: true,
      notes: row.notes
    })
    expect(row.offered).toBeGreaterThan(0)
  }
  return rows
}
