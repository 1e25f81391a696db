/**
 * `Retry.unwrap`: after `Retry.retry`, the caller's own errors again, in one step — `Fatal<E>` and the
 * `RetriesExhausted<E>` of every stop reason become the `E` inside (the deadline's: `DeadlineExceeded`), so
 * `Effect.catchTag` on the caller's own tag compiles and catches.
 */
import { diedOf, type DurationInput, fork, TestClock } from "#edition"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Data, Effect, Exit, Fiber } from "effect"
import { Backoff, Deadline, Failure, Retry, RetryBudget } from "effect-resilience"

class HttpError extends Data.TaggedError("HttpError")<{ readonly status: number; readonly attempt: number }> {}

const schedule = Backoff.exponential({ base: "100 millis", cap: "10 seconds" })

/** A call that answers `statuses[i]` on its i-th attempt (the last repeats), as an `HttpError`. */
const answering = (statuses: ReadonlyArray<number>) => {
  let attempt = 0
  return Effect.suspend(() => {
    const status = statuses[Math.min(attempt, statuses.length - 1)]!
    attempt++
    return Effect.fail(new HttpError({ status, attempt }))
  })
}

/** Classified by status: 5xx retried (a 503's Retry-After is `retryAfter`), the rest fatal. */
const classified = (call: Effect.Effect<never, HttpError>, retryAfter?: DurationInput) =>
  call.pipe(
    Failure.classify((e) =>
      e.status < 500
        ? Failure.fatal(e)
        : retryAfter === undefined
        ? Failure.retryable(e)
        : Failure.retryable(e, retryAfter)
    )
  )

const settle = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* fork(effect)
    yield* TestClock.adjust("1 minute")
    return yield* Fiber.await(fiber)
  })

describe("Retry.unwrap", () => {
  it("after Retry.retry, Effect.catchTag on the caller's own tag compiles", () => {
    const call = answering([503]).pipe(Failure.retryWhen((e) => e.status >= 500))
    const retried = call.pipe(Retry.retry({ schedule, maxAttempts: 3 }))
    // the typed outcome stays as it was
    expectTypeOf(retried).toEqualTypeOf<
      Effect.Effect<never, Failure.Fatal<HttpError> | Retry.RetriesExhausted<HttpError>>
    >()
    // @ts-expect-error without unwrap the HttpError is inside Fatal or RetriesExhausted: no such tag to catch
    retried.pipe(Effect.catchTag("HttpError", (e) => Effect.succeed(e.status)))
    // one step: the caller's error again, and the deadline's
    const plain = retried.pipe(Retry.unwrap)
    expectTypeOf(plain).toEqualTypeOf<Effect.Effect<never, HttpError | Deadline.DeadlineExceeded>>()
    const handled = plain.pipe(Effect.catchTag("HttpError", (e) => Effect.succeed(e.status)))
    expectTypeOf(handled).toEqualTypeOf<Effect.Effect<number, Deadline.DeadlineExceeded>>()
    // any other member of the error type stays; a Retryable not retried is unwrapped too
    class NotFound extends Data.TaggedError("NotFound")<{}> {}
    const mixed = Effect.fail(new NotFound()) as Effect.Effect<
      string,
      NotFound | Failure.Retryable<HttpError> | Failure.Fatal<string>
    >
    expectTypeOf(mixed.pipe(Retry.unwrap)).toEqualTypeOf<Effect.Effect<string, NotFound | HttpError | string>>()
    expectTypeOf(Effect.succeed(1).pipe(Retry.unwrap)).toEqualTypeOf<Effect.Effect<number>>()
  })

  it.effect("a Fatal failure: the error itself, after one attempt", () =>
    Effect.gen(function*() {
      const exit = yield* classified(answering([404])).pipe(
        Retry.retry({ schedule, maxAttempts: 3 }),
        Retry.unwrap,
        Effect.exit
      )
      expect(exit).toEqual(Exit.fail(new HttpError({ status: 404, attempt: 1 })))
    }))

  it.effect("reason attempts: the last attempt's error", () =>
    Effect.gen(function*() {
      const exit = yield* settle(
        classified(answering([503, 502, 500])).pipe(Retry.retry({ schedule, maxAttempts: 3 }), Retry.unwrap)
      )
      expect(exit).toEqual(Exit.fail(new HttpError({ status: 500, attempt: 3 })))
    }))

  it.effect("reason retry-after: the error whose Retry-After was too long", () =>
    Effect.gen(function*() {
      const exit = yield* classified(answering([503]), "2 minutes").pipe(
        Retry.retry({ schedule, maxAttempts: 3 }),
        Retry.unwrap,
        Effect.exit
      )
      expect(exit).toEqual(Exit.fail(new HttpError({ status: 503, attempt: 1 })))
    }))

  it.effect("reason budget: the last attempt's error", () =>
    Effect.gen(function*() {
      // maxTokens 4: the second failure leaves 2 tokens, not more than half, and ends the retries
      const budget = RetryBudget.unsafeMake({ maxTokens: 4, tokenRatio: 0.1 })
      const exit = yield* settle(
        classified(answering([503])).pipe(Retry.retry({ schedule, maxAttempts: 10, budget }), Retry.unwrap)
      )
      expect(exit).toEqual(Exit.fail(new HttpError({ status: 503, attempt: 2 })))
    }))

  it.effect("reason deadline: DeadlineExceeded, which Deadline.isTimeUp matches", () =>
    Effect.gen(function*() {
      // the second attempt fails at 100; the next would start at 300, past the deadline at 250
      const fiber = yield* fork(
        classified(answering([503])).pipe(
          Retry.retry({ schedule, maxAttempts: 10 }),
          Retry.unwrap,
          Deadline.within("250 millis"),
          Effect.flip
        )
      )
      yield* TestClock.adjust("100 millis")
      const error = yield* Fiber.join(fiber)
      expect(error).toBeInstanceOf(Deadline.DeadlineExceeded)
      expect(Deadline.isTimeUp(error)).toBe(true)
    }))

  it.effect("what it unwraps is caught by the caller's own tag", () =>
    Effect.gen(function*() {
      const exit = yield* settle(
        classified(answering([503, 503, 404])).pipe(
          Retry.retry({ schedule, maxAttempts: 5 }),
          Retry.unwrap,
          Effect.catchTag("HttpError", (e) => Effect.succeed(`${e.status} after ${e.attempt}`))
        )
      )
      expect(exit).toEqual(Exit.succeed("404 after 3"))
    }))

  it.effect("success, other errors and defects pass unchanged", () =>
    Effect.gen(function*() {
      expect(yield* Effect.succeed(1).pipe(Retry.unwrap)).toBe(1)
      const other = { _tag: "Other" } as const
      expect(yield* Effect.exit(Effect.fail(other).pipe(Retry.unwrap))).toEqual(Exit.fail(other))
      expect(diedOf(yield* Effect.exit(Effect.die("bug").pipe(Retry.unwrap)))).toBe(true)
    }))
})
