/**
 * `Telemetry.MetricsEnabled` (Effect 4 only): by default every decision of the library moves its series; with the
 * switch at `false` none does — neither the updates made as effects (`Metric.update`: a retry, its backoff
 * sample) nor those made synchronously in the context a policy keeps (a breaker's transition and refusal, a
 * bulkhead's gauges and refusal, a rate limiter's decision) — while the program's own metrics still record. Each
 * run has a registry of its own, so what it holds is exactly what the run recorded.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Metric, Schedule } from "effect"
import { Bulkhead, CircuitBreaker, Failure, RateLimiter, RateLimiterStore, Retry, Telemetry } from "../src/index.js"

const appCalls = Metric.counter("telemetry_test_app_calls_total", { incremental: true })

/** One decision of each kind; then every series of the run's registry: its name and its count or sample count. */
const workload = Effect.gen(function*() {
  yield* Effect.exit(
    Retry.retry({ schedule: Schedule.recurs(1), maxAttempts: 2 })(Effect.fail(Failure.retryable("no")))
  )
  const breaker = yield* CircuitBreaker.make({ trip: CircuitBreaker.consecutive(1), openFor: "10 seconds" })
  yield* Effect.exit(breaker.protect(Effect.fail("down")))
  const refused = yield* Effect.exit(breaker.protect(Effect.void))
  const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 0, name: "telemetry-test" })
  const hold = yield* Deferred.make<void>()
  const holder = yield* Effect.forkChild(bulkhead.protect(Deferred.await(hold)))
  yield* Effect.yieldNow
  const full = yield* Effect.exit(bulkhead.protect(Effect.void))
  yield* Deferred.succeed(hold, undefined)
  yield* Fiber.join(holder)
  const limiter = yield* RateLimiter.tokenBucket({ capacity: 10, refillPerSecond: 1 }).pipe(
    Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory())
  )
  yield* limiter.tryAcquire("k")
  yield* Metric.update(appCalls, 1)
  const series = yield* Metric.snapshot
  return {
    refused: refused._tag,
    full: full._tag,
    series: Object.fromEntries(
      series.map((s) => {
        const state = s.state as { readonly count?: number | bigint; readonly value?: number }
        return [s.id, Number(state.count ?? state.value ?? 0)] as const
      }).filter(([, n]) => n > 0)
    )
  }
})

const inRegistry = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provideService(Metric.MetricRegistry, new Map()), Effect.scoped)

const library = [
  "effect_resilience_retries_total",
  "effect_resilience_retries_exhausted_total",
  "effect_resilience_retry_backoff_seconds",
  "effect_resilience_breaker_transitions_total",
  "effect_resilience_breaker_rejections_total",
  "effect_resilience_bulkhead_rejections_total",
  "effect_resilience_rate_limiter_allowed_total"
]

describe("Telemetry.MetricsEnabled", () => {
  it.effect("by default, every decision moves the library's series", () =>
    Effect.gen(function*() {
      const run = yield* inRegistry(workload)
      expect([run.refused, run.full]).toEqual(["Failure", "Failure"])
      for (const id of library) expect(run.series[id], id).toBeGreaterThan(0)
      expect(run.series["telemetry_test_app_calls_total"]).toBe(1)
    }))

  it.effect("at false, no series of the library moves; the program's own still do", () =>
    Effect.gen(function*() {
      const run = yield* inRegistry(workload).pipe(Effect.provideService(Telemetry.MetricsEnabled, false))
      // the same decisions were taken...
      expect([run.refused, run.full]).toEqual(["Failure", "Failure"])
      // ...and only the program's counter has a series
      expect(run.series).toEqual({ telemetry_test_app_calls_total: 1 })
    }))

  it.effect("is read where the update happens: switched back on inside, the library records again", () =>
    Effect.gen(function*() {
      const run = yield* inRegistry(workload.pipe(Effect.provideService(Telemetry.MetricsEnabled, true))).pipe(
        Effect.provideService(Telemetry.MetricsEnabled, false)
      )
      for (const id of library) expect(run.series[id], id).toBeGreaterThan(0)
    }))
})
