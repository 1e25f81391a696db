/**
 * The Effect-free part of the faults "consumer-poison-exit-pg" and "consumer-poison-exit-redis" (both editions'
 * examples/faults/poisonExit.ts): what the supervisor observed, turned into the figures of issue 31 and a row of
 * `npm run faults`.
 */
import type { FaultRow } from "./fault.js"

/** What the supervisor saw from the first worker's `ready` to the queue's end. */
export interface PoisonExitRun {
  readonly kind: "pg" | "redis"
  /** Every message sent, the poison included. */
  readonly ids: ReadonlyArray<string>
  readonly poisonId: string
  readonly maxReceiveCount: number
  readonly visibilityMs: number
  /** Worker processes that ended (each one by the poison's `process.exit(1)`). */
  readonly crashes: number
  /** Milliseconds from each worker's start to its `ready` line. */
  readonly boots: ReadonlyArray<number>
  /** The receive count each handler of a message saw as it started, in order. */
  readonly starts: ReadonlyMap<string, ReadonlyArray<number>>
  /** Milliseconds from the first worker's `ready` to each message's first `committed` line. */
  readonly committedAfter: ReadonlyMap<string, number>
  /** Effect rows per message id. */
  readonly effects: ReadonlyMap<string, number>
  /** The dead-letter queue at the end: id, receive count and reason. */
  readonly deadLetters: ReadonlyArray<
    { readonly id: string; readonly receiveCount: number; readonly reason: string }
  >
  /** From the first worker's `ready` until the queue was empty. */
  readonly millis: number
}

export interface PoisonExitFigures {
  readonly crashes: number
  readonly poisonDeadLettered: boolean
  /** The healthy messages found in the dead-letter queue. */
  readonly healthyDeadLettered: ReadonlyArray<string>
  readonly healthyDeadLetteredPerCrash: number
  /**
   * The highest receive count a healthy message's handler saw: 1 unless a crash it did not cause was charged to
   * it (none of them ever failed).
   */
  readonly maxHealthyReceiveCount: number
  /** The receive counts the poison's handler saw, crash after crash. */
  readonly poisonReceiveCounts: ReadonlyArray<number>
  /** Healthy messages with no effect (not handled), and with more than one. */
  readonly lost: number
  readonly duplicated: number
  /**
   * Healthy messages handled later than one visibility timeout after the first worker started (a crash made
   * them wait for their visibility timeout), and the longest wait, in visibility timeouts.
   */
  readonly delayed: number
  readonly maxDelayTimeouts: number
  /** The median of the healthy messages' waits, in visibility timeouts. */
  readonly medianDelayTimeouts: number
}

const median = (values: ReadonlyArray<number>) =>
  values.length === 0 ? 0 : [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const timeouts = (millis: number, visibilityMs: number) => Math.round((millis / visibilityMs) * 10) / 10

export const figures = (run: PoisonExitRun): PoisonExitFigures => {
  const dead = new Set(run.deadLetters.map((d) => d.id))
  const healthy = run.ids.filter((id) => id !== run.poisonId)
  const healthyDeadLettered = healthy.filter((id) => dead.has(id))
  let lost = 0
  let duplicated = 0
  for (const id of healthy) {
    const n = run.effects.get(id) ?? 0
    if (n === 0) lost++
    if (n > 1) duplicated++
  }
  const waits = healthy.flatMap((id) => {
    const at = run.committedAfter.get(id)
    return at === undefined ? [] : [at]
  }).sort((a, b) => a - b)
  const healthyCounts = healthy.flatMap((id) => run.starts.get(id) ?? [])
  return {
    crashes: run.crashes,
    poisonDeadLettered: dead.has(run.poisonId),
    healthyDeadLettered,
    healthyDeadLetteredPerCrash: run.crashes === 0 ? 0 : healthyDeadLettered.length / run.crashes,
    maxHealthyReceiveCount: Math.max(0, ...healthyCounts),
    poisonReceiveCounts: run.starts.get(run.poisonId) ?? [],
    lost,
    duplicated,
    delayed: waits.filter((ms) => ms > run.visibilityMs).length,
    maxDelayTimeouts: waits.length === 0 ? 0 : timeouts(waits[waits.length - 1]!, run.visibilityMs),
    medianDelayTimeouts: waits.length === 0 ? 0 : timeouts(waits[Math.floor(waits.length / 2)]!, run.visibilityMs)
  }
}

/**
 * The row: nothing lost or duplicated among the healthy messages, none of them dead-lettered, and the poison
 * dead-lettered after `maxReceiveCount` crashes of its own (one more when its first crash happened beside other
 * handlers, where no one can tell which of them ended the process).
 */
export const row = (run: PoisonExitRun): FaultRow => {
  const f = figures(run)
  const poison = run.deadLetters.find((d) => d.id === run.poisonId)
  const source = run.kind === "pg" ? "PgQueue" : "RedisStreamQueue"
  const notes = [
    `${f.crashes} crashes`,
    `poison ${poison === undefined ? "not dead-lettered" : `dead-lettered (receive count ${poison.receiveCount})`}`,
    `its handler saw receive counts ${f.poisonReceiveCounts.join(", ")}`,
    `${f.healthyDeadLettered.length} healthy dead-lettered (${f.healthyDeadLetteredPerCrash.toFixed(2)} per crash)` +
    (f.healthyDeadLettered.length === 0 ? "" : `: ${f.healthyDeadLettered.join(", ")}`),
    `healthy handlers saw receive counts up to ${f.maxHealthyReceiveCount}`,
    `${f.delayed} healthy handled later than 1 visibility timeout after the first worker started, at most ` +
    `${f.maxDelayTimeouts}, median ${f.medianDelayTimeouts} (timeouts of ${run.visibilityMs} ms)`,
    `a restart took ${(median(run.boots) / 1000).toFixed(1)} s`,
    `${(run.millis / 1000).toFixed(1)} s`
  ]
  return {
    fault: `a message that calls process.exit(1), worker restarted by a supervisor (${source})`,
    offered: run.ids.length,
    lost: f.lost,
    duplicated: f.duplicated,
    notes: notes.join("; "),
    ok: f.poisonDeadLettered && f.healthyDeadLettered.length === 0 && f.maxHealthyReceiveCount <= 1 &&
      f.crashes >= run.maxReceiveCount && f.crashes <= run.maxReceiveCount + 1
  }
}
