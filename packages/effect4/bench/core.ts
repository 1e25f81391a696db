/**
 * The success-path cost of the core primitives (issue #2), each combinator built once and applied per call, as users
 * write them: `Retry.retry` and `Deadline.timeout` against Effect's own `Effect.retry` and `Effect.timeout`. The
 * `Effect.succeed` case is the floor of every overhead ratio (the harness runs each operation as its own effect).
 */
import { Effect, Schedule } from "effect"
import * as Backoff from "effect-resilience/Backoff"
import * as Deadline from "effect-resilience/Deadline"
import type * as Failure from "effect-resilience/Failure"
import * as Retry from "effect-resilience/Retry"
import { compare, type Suite } from "../../../bench/report.js"
import { type Case, measure } from "./harness.js"

const effectRetry = Effect.retry(Schedule.recurs(3))
const backoff = Backoff.exponential({ base: "100 millis", cap: "10 seconds" })
const effectRetryBackoff = Effect.retry({ schedule: backoff, times: 3 })
const resilienceRetry = Retry.retry({
  schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }),
  maxAttempts: 4
})
/** A call whose error channel says it may be retried (it never fails here: the success path is measured). */
const retryable = (i: number): Effect.Effect<number, Failure.Retryable> => Effect.succeed(i)
const effectTimeout = Effect.timeout("1 second")
const deadlineTimeout = Deadline.timeout("1 second")

export const floorName = "Effect.succeed"

export const cases: ReadonlyArray<Case> = [
  { name: floorName, make: (i) => Effect.succeed(i) },
  { name: "Effect.retry(Schedule.recurs(3))", make: (i) => effectRetry(Effect.succeed(i)) },
  { name: "Effect.retry(Backoff.exponential, times 3)", make: (i) => effectRetryBackoff(Effect.succeed(i)) },
  { name: "Retry.retry", make: (i) => resilienceRetry(retryable(i)) },
  { name: "Effect.timeout", make: (i) => effectTimeout(Effect.succeed(i)), ops: 5_000 },
  { name: "Deadline.timeout", make: (i) => deadlineTimeout(Effect.succeed(i)), ops: 5_000 }
]

export const suite: Suite = {
  name: "core",
  run: async () => {
    const ns = await measure(cases)
    const floor = ns[floorName]
    return {
      cases: ns,
      comparisons: [
        compare(ns, "Retry.retry", "Effect.retry(Schedule.recurs(3))", "overhead", { atMost: 0.10 }, floor),
        compare(ns, "Retry.retry", "Effect.retry(Backoff.exponential, times 3)", "overhead", undefined, floor),
        compare(ns, "Deadline.timeout", "Effect.timeout", "overhead", { atMost: 0.5 }, floor)
      ].filter((c) => c !== undefined)
    }
  }
}
