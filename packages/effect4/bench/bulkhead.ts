/** Issue #3: per-call overhead of `bulkhead.protect` when a slot is free (the common case). */
import { Effect, Scope, Semaphore } from "effect"
import * as Bulkhead from "effect-resilience/Bulkhead"
import { compare, type Suite } from "../../../bench/report.js"
import { type Case, measure } from "./harness.js"

// Built once and kept for the whole run, as an application holds its bulkheads.
const scope = Effect.runSync(Scope.make())
const bulkhead = Effect.runSync(
  Scope.provide(scope)(Bulkhead.make({ maxConcurrent: 16, maxQueue: 64, queueTimeout: "1 second" }))
)
const semaphore = Effect.runSync(Semaphore.make(16))
const withPermit = Semaphore.withPermits(semaphore, 1)

export const cases: ReadonlyArray<Case> = [
  { name: "Semaphore.withPermits(1)", make: (i) => withPermit(Effect.succeed(i)) },
  { name: "bulkhead.protect (uncontended)", make: (i) => bulkhead.protect(Effect.succeed(i)) }
]

export const suite: Suite = {
  name: "bulkhead",
  run: async ({ floor }) => {
    const ns = await measure(cases)
    return {
      cases: ns,
      comparisons: [
        compare(ns, "bulkhead.protect (uncontended)", "Semaphore.withPermits(1)", "overhead", { atMost: 0.5 }, floor)
      ].filter((c) => c !== undefined)
    }
  }
}
