/**
 * Classifying after `Deadline.timeout`: its error type adds `AttemptTimeout` and `DeadlineExceeded` to the caller's,
 * so a predicate that reads the caller's fields must first say which member it reads them on. The pattern that
 * compiles, and what it does.
 */
import { fork, TestClock } from "#edition"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Data, Effect, Exit, Fiber } from "effect"
import { Backoff, Deadline, Failure, Retry } from "effect-resilience"

class HttpError extends Data.TaggedError("HttpError")<{ readonly status: number }> {}

const retry = Retry.retry({ schedule: Backoff.exponential({ base: "100 millis", cap: "1 second" }), maxAttempts: 5 })

/** A call whose i-th attempt hangs (`"hang"`) or fails with the status. */
const scripted = (steps: ReadonlyArray<number | "hang">) => {
  let calls = 0
  const call = Effect.suspend((): Effect.Effect<string, HttpError> => {
    const step = steps[Math.min(calls++, steps.length - 1)]!
    return step === "hang" ? Effect.never : Effect.fail(new HttpError({ status: step }))
  })
  return { call, calls: () => calls }
}

describe("Deadline.timeout, then a predicate on the caller's error", () => {
  it("the predicate narrows to the caller's tag before reading its fields; then it compiles", () => {
    const { call } = scripted([503])
    const timed = call.pipe(Deadline.timeout("300 millis"))
    expectTypeOf(timed).toEqualTypeOf<
      Effect.Effect<string, HttpError | Deadline.AttemptTimeout | Deadline.DeadlineExceeded>
    >()
    // `status` is not a field of DeadlineExceeded, which the union holds after AttemptTimeout is ruled out
    // @ts-expect-error Property 'status' does not exist on type 'DeadlineExceeded'
    timed.pipe(Failure.retryWhen((e) => e._tag === "AttemptTimeout" || e.status >= 500))
    // by tag, or with instanceof: DeadlineExceeded is then Fatal, never retried
    const byTag = timed.pipe(
      Failure.retryWhen((e) => e._tag === "AttemptTimeout" || (e._tag === "HttpError" && e.status >= 500)),
      retry
    )
    const byClass = timed.pipe(
      Failure.retryWhen((e) => e._tag === "AttemptTimeout" || (e instanceof HttpError && e.status >= 500)),
      retry
    )
    type Outcome = Effect.Effect<
      string,
      | Failure.Fatal<HttpError | Deadline.AttemptTimeout | Deadline.DeadlineExceeded>
      | Retry.RetriesExhausted<HttpError | Deadline.AttemptTimeout | Deadline.DeadlineExceeded>
    >
    expectTypeOf(byTag).toEqualTypeOf<Outcome>()
    expectTypeOf(byClass).toEqualTypeOf<Outcome>()
    // and with Retry.unwrap, the caller's tag is caught
    const handled = byTag.pipe(Retry.unwrap, Effect.catchTag("HttpError", (e) => Effect.succeed(`${e.status}`)))
    expectTypeOf(handled).toEqualTypeOf<
      Effect.Effect<string, Deadline.AttemptTimeout | Deadline.DeadlineExceeded>
    >()
  })

  it.effect("a timed-out attempt and a 5xx are retried, a 4xx is not", () =>
    Effect.gen(function*() {
      const { call, calls } = scripted(["hang", 503, 404, 200])
      const fiber = yield* fork(
        call.pipe(
          Deadline.timeout("300 millis"),
          Failure.retryWhen((e) => e._tag === "AttemptTimeout" || (e._tag === "HttpError" && e.status >= 500)),
          retry,
          Retry.unwrap,
          Effect.catchTag("HttpError", (e) => Effect.succeed(`gave up on ${e.status}`))
        )
      )
      yield* TestClock.adjust("1 minute")
      expect(yield* Fiber.await(fiber)).toEqual(Exit.succeed("gave up on 404"))
      expect(calls()).toBe(3)
    }))

  it.effect("the deadline running out inside Deadline.timeout is not retried", () =>
    Effect.gen(function*() {
      const { call, calls } = scripted(["hang"])
      const fiber = yield* fork(
        call.pipe(
          Deadline.timeout("300 millis"),
          Failure.retryWhen((e) => e._tag === "AttemptTimeout" || (e._tag === "HttpError" && e.status >= 500)),
          retry,
          Retry.unwrap,
          Deadline.within("200 millis"),
          Effect.flip
        )
      )
      yield* TestClock.adjust("1 minute")
      const error = yield* Fiber.join(fiber)
      expect(error).toBeInstanceOf(Deadline.DeadlineExceeded)
      expect(Deadline.isTimeUp(error)).toBe(true)
      expect(calls()).toBe(1)
    }))
})
