/**
 * Issue 33's traces of the policies around any effect (Effect 4 only): no span of their own on the hot path, but
 * their decisions as events (`Module.decision`) of the caller's span, read here from Effect's native spans.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, type Duration, Effect, Fiber, Random, Schedule } from "effect"
import { TestClock } from "effect/testing"
import {
  AdaptiveThrottle,
  Bulkhead,
  CircuitBreaker,
  Failure,
  Hedge,
  RateLimiter,
  RateLimiterStore,
  Retry
} from "../../src/index.js"
import { eventsOf, recorder } from "./support.js"

class Boom {
  readonly _tag = "Boom"
}

/** Runs `self` in a span `call` of a recording tracer, advancing the TestClock; returns that span. */
const traced = <A, E>(self: Effect.Effect<A, E>, advance: Duration.Input = "1 minute") =>
  Effect.gen(function*() {
    const recorded = recorder()
    const fiber = yield* Effect.forkChild(
      Effect.exit(self).pipe(Effect.withSpan("call"), Effect.withTracer(recorded.tracer)),
      { startImmediately: true }
    )
    yield* TestClock.adjust(advance)
    const exit = yield* Fiber.join(fiber)
    const call = recorded.spans.find((s) => s.name === "call")!
    return { exit, call, spans: recorded.spans }
  })

describe("policy traces: events on the current span", () => {
  it.effect("Retry.retry: a Retry.backoff event per retry, Retry.exhausted when it gives up, no span", () =>
    Effect.gen(function*() {
      const { call, exit, spans } = yield* traced(
        Effect.fail(Failure.retryable(new Boom())).pipe(
          Retry.retry({ schedule: Schedule.exponential("100 millis"), maxAttempts: 3 })
        )
      )
      expect(exit._tag).toBe("Failure")
      expect(spans.map((s) => s.name)).toEqual(["call"])
      expect(eventsOf(call)).toEqual([
        {
          name: "Retry.backoff",
          attributes: {
            "retry.attempt": 1,
            "retry.delay_ms": 100,
            "retry.delay_source": "schedule",
            "error.type": "Boom"
          }
        },
        {
          name: "Retry.backoff",
          attributes: {
            "retry.attempt": 2,
            "retry.delay_ms": 200,
            "retry.delay_source": "schedule",
            "error.type": "Boom"
          }
        },
        {
          name: "Retry.exhausted",
          attributes: { "retry.stop_reason": "attempts", "retry.attempts": 3, "error.type": "Boom" }
        }
      ])
      // the event's time is the TestClock's: the second backoff starts after 100 ms of waiting
      expect(call.events.map(([, time]) => time)).toEqual([0n, 100_000_000n, 300_000_000n])
    }))

  it.effect("Retry.retry: the server's Retry-After, when longer, is the backoff's source", () =>
    Effect.gen(function*() {
      let n = 0
      const { call, exit } = yield* traced(
        Effect.suspend(() => n++ === 0 ? Effect.fail(Failure.retryable(new Boom(), "2 seconds")) : Effect.succeed(n))
          .pipe(Retry.retry({ schedule: Schedule.spaced("10 millis"), maxAttempts: 3 }))
      )
      expect(exit._tag).toBe("Success")
      expect(eventsOf(call)).toEqual([{
        name: "Retry.backoff",
        attributes: {
          "retry.attempt": 1,
          "retry.delay_ms": 2000,
          "retry.delay_source": "retry-after",
          "error.type": "Boom"
        }
      }])
    }))

  it.effect("CircuitBreaker: the transition a call caused and a rejection are events with the breaker's name", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreaker.make({
        name: "traces-breaker",
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second"
      })
      const opened = yield* traced(breaker.protect(Effect.fail(new Boom())), 0)
      expect(eventsOf(opened.call)).toEqual([{
        name: "CircuitBreaker.transition",
        attributes: { breaker: "traces-breaker", "circuit_breaker.from": "closed", "circuit_breaker.to": "open" }
      }])
      const refused = yield* traced(breaker.protect(Effect.void), 0)
      expect(eventsOf(refused.call)).toEqual([{
        name: "CircuitBreaker.rejected",
        attributes: { breaker: "traces-breaker", "circuit_breaker.state": "open" }
      }])
      yield* TestClock.adjust("1 second")
      const probe = yield* traced(breaker.protect(Effect.void), 0)
      expect(eventsOf(probe.call).map((e) => e.attributes)).toEqual([
        { breaker: "traces-breaker", "circuit_breaker.from": "half-open", "circuit_breaker.to": "closed" }
      ])
    }).pipe(Effect.scoped))

  it.effect("Hedge: each extra copy launched is an event, and the settled race says which copy won", () =>
    Effect.gen(function*() {
      let n = 0
      const { call } = yield* traced(
        Effect.suspend(() => ++n === 1 ? Effect.never : Effect.as(Effect.sleep("5 millis"), n)).pipe(
          Hedge.hedge({ delay: "10 millis", maxAttempts: 3 })
        )
      )
      expect(eventsOf(call)).toEqual([
        { name: "Hedge.launched", attributes: { "hedge.copy": 2, "hedge.failed": 0 } },
        { name: "Hedge.settled", attributes: { "hedge.copies": 2, "hedge.winner": 2 } }
      ])
      expect(call.events.map(([, time]) => time)).toEqual([10_000_000n, 15_000_000n])
    }))

  it.effect("Bulkhead: a queued call's wait and a refusal are events with the bulkhead's name", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 1, name: "traces-bulkhead" })
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(bulkhead.protect(Deferred.await(gate)))
      yield* Effect.yieldNow
      const recorded = recorder()
      const queued = yield* Effect.forkChild(
        bulkhead.protect(Effect.void).pipe(Effect.withSpan("queued"), Effect.withTracer(recorded.tracer))
      )
      yield* Effect.yieldNow
      const refused = yield* Effect.exit(
        bulkhead.protect(Effect.void).pipe(Effect.withSpan("refused"), Effect.withTracer(recorded.tracer))
      )
      expect(refused._tag).toBe("Failure")
      yield* TestClock.adjust("250 millis")
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(queued)
      const span = (name: string) => recorded.spans.find((s) => s.name === name)!
      expect(eventsOf(span("refused"))).toEqual([
        { name: "Bulkhead.rejected", attributes: { bulkhead: "traces-bulkhead", reason: "queue-full" } }
      ])
      expect(eventsOf(span("queued"))).toEqual([
        { name: "Bulkhead.queued", attributes: { bulkhead: "traces-bulkhead", "queue.wait_ms": 250 } }
      ])
    }))

  it.effect("RateLimiter: each denial is an event, with the permits left and the wait asked", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1, name: "traces-limiter" }).pipe(
        Effect.provide(RateLimiterStore.layerMemory)
      )
      const { call } = yield* traced(
        Effect.andThen(limiter.tryAcquire("k"), limiter.tryAcquire("k"))
      )
      expect(eventsOf(call)).toEqual([{
        name: "RateLimiter.denied",
        attributes: {
          "rate_limiter.name": "traces-limiter",
          "rate_limiter.algorithm": "token-bucket",
          "rate_limiter.remaining": 0,
          "rate_limiter.retry_after_ms": 1000
        }
      }])
    }))

  it.effect("AdaptiveThrottle: each local rejection is an event with the key and the probability", () =>
    Effect.gen(function*() {
      const throttle = yield* AdaptiveThrottle.make({ name: "traces-throttle", maxRejectionRate: 1 })
      const recorded = recorder()
      let rejected = 0
      yield* Effect.gen(function*() {
        for (let i = 0; i < 50; i++) {
          const exit = yield* Effect.exit(throttle.protect(Effect.fail("503"), "k"))
          if (exit._tag === "Failure" && String(exit.cause).includes("LocallyRejected")) rejected++
        }
      }).pipe(Effect.withSpan("calls"), Effect.withTracer(recorded.tracer), Random.withSeed("traces"))
      const events = eventsOf(recorded.spans.find((s) => s.name === "calls")!)
      expect(rejected).toBeGreaterThan(0)
      expect(events).toHaveLength(rejected)
      for (const e of events) {
        expect(e.name).toBe("AdaptiveThrottle.rejected")
        expect(e.attributes).toMatchObject({ throttle: "traces-throttle", "throttle.key": "k" })
        expect(e.attributes["throttle.probability"]).toBeGreaterThan(0)
      }
    }))
})
