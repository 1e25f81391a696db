import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, ExecutionPlan, Fiber, Layer } from "effect"
import { Backoff, CircuitBreaker, Deadline, Failure, Retry } from "effect-resilience"
import { TestClock } from "effect/testing"

type QuoteError = Failure.Retryable<string> | Failure.Fatal<string>

class Quotes extends Context.Service<Quotes, { readonly quote: Effect.Effect<number, unknown> }>()("Quotes") {}

const quote = Effect.flatMap(Quotes, (quotes) => quotes.quote)

const retry = Retry.retry({ schedule: Backoff.fullJitter({ base: "100 millis", cap: "1 second" }), maxAttempts: 3 })

// the breaker is built once, with the plan: every run of the plan shares it
const makePlan = (primary: Effect.Effect<number, QuoteError>, fallback: Effect.Effect<number>) =>
  Effect.map(
    CircuitBreaker.make({ trip: CircuitBreaker.consecutive(3), openFor: "30 seconds" }),
    (breaker) =>
      ExecutionPlan.make(
        // each attempt goes through the breaker; Retry.retry retries only Retryable failures, and stops
        // at once on CircuitOpen and before the deadline
        { provide: Layer.succeed(Quotes, { quote: primary.pipe(breaker.protect, retry) }) },
        // asked about the error that ended the primary: fall back on anything but a Fatal one
        { provide: Layer.succeed(Quotes, { quote: fallback }), while: (e: unknown) => !Failure.isFatal(e) }
      )
  )

describe("a breaker-protected primary and a fallback in an ExecutionPlan", () => {
  it.effect("falls back once retries are exhausted, then at once while the breaker is open", () =>
    Effect.gen(function*() {
      let calls = 0
      const down = Effect.suspend(() => {
        calls++
        return Effect.fail(Failure.retryable("503"))
      })
      const plan = yield* makePlan(down, Effect.succeed(42))
      const program = quote.pipe(Effect.withExecutionPlan(plan), Deadline.within("5 seconds"))

      const first = yield* Effect.forkChild(program)
      yield* TestClock.adjust("5 seconds") // time for the backoff
      expect(yield* Fiber.join(first)).toBe(42)
      expect(calls).toBe(3) // three failures in a row: the breaker is open

      expect(yield* program).toBe(42) // no clock move needed: CircuitOpen falls back at once
      expect(calls).toBe(3)
    }))

  it.effect("does not fall back on a Fatal failure", () =>
    Effect.gen(function*() {
      let fallbacks = 0
      const plan = yield* makePlan(Effect.fail(Failure.fatal("400")), Effect.sync(() => ++fallbacks))
      const error = yield* quote.pipe(Effect.withExecutionPlan(plan), Effect.flip)
      expect(Failure.isFatal(error)).toBe(true)
      expect(fallbacks).toBe(0)
    }))
})
