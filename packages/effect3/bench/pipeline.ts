/**
 * Issue #3: the full client-side pipeline on a succeeding call, against the same pipeline in cockatiel
 * (`wrap(retry, circuitBreaker, timeout)`, measured natively with `await policy.execute(...)`).
 *
 * Ours: `Retry.retry(limiter.tryAcquire *> breaker.protect(Deadline.timeout(call)))`. Cockatiel has no rate
 * limiter, so ours does strictly more work per call.
 */
import {
  circuitBreaker,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleAll,
  retry,
  timeout,
  TimeoutStrategy,
  wrap
} from "cockatiel"
import { Effect, Scope } from "effect"
import * as Backoff from "effect-resilience/Backoff"
import * as CircuitBreaker from "effect-resilience/CircuitBreaker"
import * as Deadline from "effect-resilience/Deadline"
import type * as Failure from "effect-resilience/Failure"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStore from "effect-resilience/RateLimiterStore"
import * as Retry from "effect-resilience/Retry"
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

const cockatielPolicy = wrap(
  retry(handleAll, { maxAttempts: 2, backoff: new ExponentialBackoff() }),
  circuitBreaker(handleAll, { halfOpenAfter: 10_000, breaker: new ConsecutiveBreaker(5) }),
  timeout(1_000, TimeoutStrategy.Aggressive)
)

/** Native per-call timing of cockatiel: median of rounds of sequential awaited calls. */
const measureCockatiel = async (ops = 5_000, rounds = 7): Promise<number> => {
  const run = async (n: number) => {
    for (let i = 0; i < n; i++) await cockatielPolicy.execute(() => Promise.resolve(i))
  }
  await run(1_000)
  const samples: Array<number> = []
  for (let r = 0; r < rounds; r++) {
    const start = process.hrtime.bigint()
    await run(ops)
    samples.push(Number(process.hrtime.bigint() - start) / ops)
  }
  samples.sort((a, b) => a - b)
  return samples[Math.floor(samples.length / 2)]!
}

/** Cases measured outside the Effect harness, merged into the results (and the --json output). */
export const extra = async (): Promise<Record<string, number>> => ({
  "pipeline (cockatiel)": await measureCockatiel()
})

/** [case, reference, target ratio, "absolute": compare whole per-call costs, not overheads] */
export const targets: ReadonlyArray<readonly [string, string, number, "absolute"]> = [
  ["pipeline (effect-resilience)", "pipeline (cockatiel)", 0.5, "absolute"]
]
