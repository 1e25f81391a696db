/**
 * Issue #3: the full client-side pipeline on a succeeding call, against the same pipeline in cockatiel
 * (`wrap(retry, circuitBreaker, timeout)`, measured natively with `await policy.execute(...)`, the root's
 * `bench/cockatiel.ts`). Ours: `Retry.retry(limiter.tryAcquire *> breaker.protect(Deadline.timeout(call)))`.
 * Cockatiel has no rate limiter, so ours does strictly more work per call. Whole per-call costs are compared
 * (target ≤ 0.15× of cockatiel's time per call), the two sides' rounds interleaved.
 */
import { Effect, Scope } from "effect"
import * as Backoff from "effect-resilience/Backoff"
import * as CircuitBreaker from "effect-resilience/CircuitBreaker"
import * as Deadline from "effect-resilience/Deadline"
import type * as Failure from "effect-resilience/Failure"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStore from "effect-resilience/RateLimiterStore"
import * as Retry from "effect-resilience/Retry"
import { cockatielPipelineName, cockatielPipelineRound } from "../../../bench/cockatiel.js"
import { interleaved } from "../../../bench/measure.js"
import { median, type Suite } from "../../../bench/report.js"
import { type Case, round } from "./harness.js"

const scope = Effect.runSync(Scope.make())
const breaker = Effect.runSync(
  Scope.provide(scope)(CircuitBreaker.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }))
)
const limiter = Effect.runSync(
  RateLimiter.tokenBucket({ capacity: 1_000_000_000, refillPerSecond: 1_000_000_000 }).pipe(
    Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory())
  )
)
const retryPolicy = Retry.retry({
  schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }),
  maxAttempts: 3
})
const attemptTimeout = Deadline.timeout("1 second")
/** A call whose error channel says it may be retried (it never fails here: the success path is measured). */
const call = (i: number): Effect.Effect<number, Failure.Retryable> => Effect.succeed(i)

const ours: Case = {
  name: "pipeline (effect-resilience)",
  make: (i) => retryPolicy(Effect.andThen(limiter.tryAcquire("origin"), breaker.protect(attemptTimeout(call(i))))),
  ops: 5_000
}

export const suite: Suite = {
  name: "pipeline",
  run: async () => {
    const [a, b] = await interleaved([() => round(ours), () => cockatielPipelineRound(5_000)], 7, 1)
    const oursNs = median(a!)
    const theirsNs = median(b!)
    return {
      cases: { [ours.name]: oursNs, [cockatielPipelineName]: theirsNs },
      comparisons: [{
        case: ours.name,
        baseline: cockatielPipelineName,
        kind: "time",
        ratio: oursNs / theirsNs,
        target: { atMost: 0.15 }
      }]
    }
  }
}
