/** Issue #3: per-call overhead of `bulkhead.protect` when a slot is free (the common case). */
import { Effect, Scope } from "effect"
import * as Bulkhead from "effect-resilience/Bulkhead"
import type { Case } from "./harness.js"

// Built once and kept for the whole run, as an application holds its bulkheads.
const scope = Effect.runSync(Scope.make())
const bulkhead = Effect.runSync(
  Scope.extend(Bulkhead.make({ maxConcurrent: 16, maxQueue: 64, queueTimeout: "1 second" }), scope)
)
const semaphore = Effect.runSync(Effect.makeSemaphore(16))
const withPermit = semaphore.withPermits(1)

export const cases: ReadonlyArray<Case> = [
  { name: "Semaphore.withPermits(1)", make: (i) => withPermit(Effect.succeed(i)) },
  { name: "bulkhead.protect (uncontended)", make: (i) => bulkhead.protect(Effect.succeed(i)) }
]

/** [case, reference, target ratio of overheads over the baseline] */
export const targets: ReadonlyArray<readonly [string, string, number]> = [
  ["bulkhead.protect (uncontended)", "Semaphore.withPermits(1)", 0.5]
]
