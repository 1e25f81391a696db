/**
 * One fault of `npm run faults` (examples/faults.ts): a scenario with real processes that injects a fault
 * and counts what survived. Every scenario module exports a `Fault`; the runner prints one row per fault and
 * exits non-zero when any row lost or duplicated something.
 */
export interface FaultRow {
  /** What was done, e.g. "Redis SIGKILLed and restarted under 3 serve --store redis". */
  readonly fault: string
  /** What was offered: logical requests or messages. */
  readonly offered: number
  /** Offered items with no effect at the end (an order never created, a message never handled). */
  readonly lost: number
  /** Items with more than one effect (an order created twice, a message handled twice). */
  readonly duplicated: number
  /** Anything else worth one line: statuses seen during the outage, dead-lettered poison messages, bounds. */
  readonly notes: string
  /** A row that checks a bound rather than losses (e.g. clock skew): false when the bound was broken. */
  readonly ok?: boolean
}

export interface Fault {
  readonly name: string
  /** Runs the scenario to the end, cleans up every process and resource it started, and reports. */
  readonly run: () => Promise<ReadonlyArray<FaultRow>>
}
