/** Issue #3: per-call overhead of `CircuitBreaker.protect`. */
import { Effect, Exit, Ref, Schedule, Scope } from "effect"
import * as CircuitBreaker from "effect-resilience/CircuitBreaker"
import type { Case } from "./harness.js"

// Breakers are built once, in a scope that lives as long as the benchmark process.
const scope = Effect.runSync(Scope.make())
const build = (options: CircuitBreaker.Options) => Effect.runSync(Scope.extend(CircuitBreaker.make(options), scope))

const consecutive = build({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" })
const countWindow = build({
  trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 10, window: { calls: 100 } }),
  openFor: Schedule.exponential("1 second")
})
const timeWindow = build({
  trip: CircuitBreaker.failureRate({
    threshold: 0.5,
    minimumCalls: 10,
    window: { duration: "10 seconds", buckets: 10 },
    slowCall: { duration: "1 second", rateThreshold: 0.5 }
  }),
  openFor: "10 seconds"
})
const open = build({ trip: CircuitBreaker.consecutive(1), openFor: "1 hour" })
Effect.runSync(open.isolate)

/**
 * The reference: the breaker one writes first with Effect — a `Ref` of consecutive failures read before
 * the call and updated in `onExit` (no half-open, no metrics, no stream).
 */
const failures = Effect.runSync(Ref.make(0))
const naive = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E | "open"> =>
  Effect.flatMap<number, never, never, A, E | "open", never>(
    Ref.get(failures),
    (n) =>
      n >= 5 ? Effect.fail("open" as const) : Effect.onExit(
        self,
        (exit) => Exit.isSuccess(exit) ? Ref.set(failures, 0) : Ref.update(failures, (k) => k + 1)
      )
  )

export const cases: ReadonlyArray<Case> = [
  { name: "Ref + onExit breaker (naive)", make: (i) => naive(Effect.succeed(i)) },
  { name: "breaker.protect", make: (i) => consecutive.protect(Effect.succeed(i)) },
  { name: "breaker.protect (count window)", make: (i) => countWindow.protect(Effect.succeed(i)) },
  { name: "breaker.protect (time window + slow)", make: (i) => timeWindow.protect(Effect.succeed(i)) },
  { name: "breaker.protect (open, rejected)", make: (i) => open.protect(Effect.succeed(i)), ops: 5_000 }
]

/** [case, reference, target ratio of overheads over the baseline] */
export const targets: ReadonlyArray<readonly [string, string, number]> = [
  ["breaker.protect", "Ref + onExit breaker (naive)", 0.5]
]
