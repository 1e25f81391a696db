/** Issue #2: per-call overhead of the core primitives on the success path. */
import { Effect, Schedule } from "effect"
import * as Backoff from "effect-resilience/Backoff"
import * as Deadline from "effect-resilience/Deadline"
import type * as Failure from "effect-resilience/Failure"
import * as Retry from "effect-resilience/Retry"
import type { Case } from "./harness.js"

// Policies are built once and applied per call, as users write them.
const effectRetry = Effect.retry(Schedule.recurs(3))
const resilienceRetry = Retry.retry({
  schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }),
  maxAttempts: 4
})
/** A call whose error channel says it may be retried (it never fails here: the success path is measured). */
const retryable = (i: number): Effect.Effect<number, Failure.Retryable> => Effect.succeed(i)
const effectTimeout = Effect.timeout("1 second")
const deadlineTimeout = Deadline.timeout("1 second")

export const cases: ReadonlyArray<Case> = [
  { name: "Effect.succeed", make: (i) => Effect.succeed(i) },
  { name: "Effect.retry", make: (i) => effectRetry(Effect.succeed(i)) },
  { name: "Retry.retry", make: (i) => resilienceRetry(retryable(i)) },
  { name: "Effect.timeout", make: (i) => effectTimeout(Effect.succeed(i)), ops: 5_000 },
  { name: "Deadline.timeout", make: (i) => deadlineTimeout(Effect.succeed(i)), ops: 5_000 }
]

/** [case, reference, target ratio of overheads over the baseline] */
export const targets: ReadonlyArray<readonly [string, string, number]> = [
  ["Retry.retry", "Effect.retry", 0.10],
  ["Deadline.timeout", "Effect.timeout", 0.5]
]
