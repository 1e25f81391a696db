/**
 * Issue #3: the full client-side pipeline on a succeeding call, against the same pipeline in cockatiel
 * (`wrap(retry, circuitBreaker, timeout)`, measured natively with `await policy.execute(...)`: the root's
 * `bench/cockatiel.ts`, shared with the Effect 4 edition's bench).
 *
 * Ours: `Retry.retry(limiter.tryAcquire *> breaker.protect(Deadline.timeout(call)))`. Cockatiel has no rate
 * limiter, so ours does strictly more work per call.
 */
import { Effect, Scope } from "effect"
import * as Backoff from "effect-resilience/Backoff"
import * as CircuitBreaker from "effect-resilience/CircuitBreaker"
import * as Deadline from "effect-resilience/Deadline"
import type * as Failure from "effect-resilience/Failure"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStore from "effect-resilience/RateLimiterStore"
import * as Retry from "effect-resilience/Retry"
import { cockatielPipelineName, measureCockatielPipeline } from "../../../bench/cockatiel.js"
import type { Case } from "./harness.js"

const scope = Effect.runSync(Scope.make())
const breaker = Effect.runSync(
  Scope.extend(CircuitBreaker.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }), scope)
)
const limiter = Effect.runSync(
  RateLimiter.tokenBucket({ capacity: 1_000_000_000, refillPerSecond: 1_000_000_000 }).pipe(
    Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory()),
    (effect) => Scope.extend(effect, scope)
  )
)
const retryPolicy = Retry.retry({
  schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }),
  maxAttempts: 3
})
const attemptTimeout = Deadline.timeout("1 second")
/** A call whose error channel says it may be retried (it never fails here: the success path is measured). */
const call = (i: number): Effect.Effect<number, Failure.Retryable> => Effect.succeed(i)

export const cases: ReadonlyArray<Case> = [
  {
    name: "pipeline (effect-resilience)",
    make: (i) => retryPolicy(Effect.zipRight(limiter.tryAcquire("origin"), breaker.protect(attemptTimeout(call(i))))),
    ops: 5_000
  }
]

/** Cases measured outside the Effect harness, merged into the results (and the --json output). */
export const extra = async (): Promise<Record<string, number>> => ({
  [cockatielPipelineName]: await measureCockatielPipeline()
})

/** [case, reference, target ratio, "absolute": compare whole per-call costs, not overheads] */
export const targets: ReadonlyArray<readonly [string, string, number, "absolute"]> = [
  ["pipeline (effect-resilience)", "pipeline (cockatiel)", 0.5, "absolute"]
]
