/**
 * Issue #3: per-call overhead of `breaker.protect` on a closed breaker, against the breaker one writes first with
 * Effect (a `Ref` of consecutive failures) and against Effect 4's own `effect/persistence` CircuitBreaker (memory
 * store), beside this library's keyed bridge over it (`CircuitBreaker/Persistence`).
 */
import { Effect, Exit, Ref, Schedule, Scope } from "effect"
import * as CircuitBreaker from "effect-resilience/CircuitBreaker"
import * as CircuitBreakerPersistence from "effect-resilience/CircuitBreaker/Persistence"
import { CircuitBreaker as Persisted } from "effect/persistence"
import { compare, type Suite } from "../../../bench/report.js"
import { type Case, measure } from "./harness.js"

// Breakers are built once, in a scope that lives as long as the benchmark process.
const scope = Effect.runSync(Scope.make())
const inScope = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>): A => Effect.runSync(Scope.provide(scope)(effect))
const build = (options: CircuitBreaker.Options) => inScope(CircuitBreaker.make(options))

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

const effectBreaker = await Effect.runPromise(
  Scope.provide(scope)(
    Persisted.make({ tripPolicy: Persisted.consecutive(5), openDuration: "10 seconds" }).pipe(
      Effect.provide(Persisted.layerStoreMemory())
    )
  )
)
const bridge = await Effect.runPromise(
  Scope.provide(scope)(CircuitBreakerPersistence.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }))
)
const key = { key: "bench" }

/**
 * The reference: the breaker one writes first with Effect — a `Ref` of consecutive failures read before the call
 * and updated in `onExit` (no half-open, no metrics, no stream).
 */
const failures = Effect.runSync(Ref.make(0))
const naive = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E | "open"> =>
  Effect.flatMap(
    Ref.get(failures),
    (n): Effect.Effect<A, E | "open"> =>
      n >= 5 ? Effect.fail("open" as const) : Effect.onExit(
        self,
        (exit) => Exit.isSuccess(exit) ? Ref.set(failures, 0) : Ref.update(failures, (k) => k + 1)
      )
  )

const persisted = "effect/persistence CircuitBreaker.execute (memory)"

export const cases: ReadonlyArray<Case> = [
  { name: "Ref + onExit breaker (naive)", make: (i) => naive(Effect.succeed(i)) },
  { name: "breaker.protect", make: (i) => consecutive.protect(Effect.succeed(i)) },
  { name: "breaker.protect (count window)", make: (i) => countWindow.protect(Effect.succeed(i)) },
  { name: "breaker.protect (time window + slow)", make: (i) => timeWindow.protect(Effect.succeed(i)) },
  { name: "breaker.protect (open, rejected)", make: (i) => open.protect(Effect.succeed(i)), ops: 5_000 },
  { name: persisted, make: (i) => effectBreaker.execute(Effect.succeed(i), key) },
  { name: "CircuitBreaker/Persistence execute (keyed bridge)", make: (i) => bridge.execute(Effect.succeed(i), key) }
]

export const suite: Suite = {
  name: "breaker",
  run: async ({ floor }) => {
    const ns = await measure(cases)
    return {
      cases: ns,
      comparisons: [
        compare(ns, "breaker.protect", "Ref + onExit breaker (naive)", "overhead", { atMost: 0.5 }, floor),
        compare(ns, "breaker.protect", persisted, "overhead", undefined, floor),
        compare(ns, "CircuitBreaker/Persistence execute (keyed bridge)", persisted, "overhead", undefined, floor)
      ].filter((c) => c !== undefined)
    }
  }
}
