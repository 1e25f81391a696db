import { type DurationInput, fork, TestClock } from "#edition"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { Backoff, Deadline, Failure, RateLimiter, RateLimiterStore, Retry } from "effect-resilience"

class Unavailable {
  readonly _tag = "Unavailable"
}

/** The README's wiring around a call that never answers: per-attempt timeout, retries, a deadline on it all. */
const hung = (attempt: DurationInput, total: DurationInput) =>
  (Effect.never as Effect.Effect<string, Unavailable>).pipe(
    Deadline.timeout(attempt),
    Failure.retryWhen((e) => e._tag === "AttemptTimeout" || e._tag === "Unavailable"),
    Retry.retry({ schedule: Backoff.exponential({ base: "100 millis", cap: "100 millis" }), maxAttempts: 10 }),
    Deadline.within(total)
  )

/** Runs `effect` to its end under the TestClock and returns its failure. */
const failureOf = <E>(effect: Effect.Effect<unknown, E>) =>
  Effect.gen(function*() {
    const fiber = yield* fork(Effect.flip(effect))
    yield* TestClock.adjust("1 minute")
    return yield* Fiber.join(fiber)
  })

describe("Deadline.isTimeUp", () => {
  it.effect("one answer for the three ways one configuration runs out of time", () =>
    Effect.gen(function*() {
      // where the second ran out decides the error: between attempts, during one, or inside Deadline.timeout
      const between = yield* failureOf(hung("950 millis", "1 second"))
      const during = yield* failureOf(hung("5 seconds", "1 second"))
      const classified = yield* failureOf(hung("500 millis", "1 second"))
      expect(between).toMatchObject({ _tag: "RetriesExhausted", reason: "deadline" })
      // "during" and "classified" end with two timers due at 1 s: the attempt's timeout, clipped to the deadline,
      // and the outer within. Which one wins differs between the editions: on Effect 3 the within's ("during",
      // DeadlineExceeded) and the attempt's ("classified", its DeadlineExceeded classified Fatal); on Effect 4,
      // whose TestClock orders ties its own way and resumes on the timer's stack, exactly the other way round.
      // Time up either way, which is what isTimeUp is for
      for (const error of [during, classified]) {
        const cause = error._tag === "Fatal" ? (error.cause as { readonly _tag?: string })._tag : undefined
        expect(error._tag === "DeadlineExceeded" || cause === "DeadlineExceeded", error._tag).toBe(true)
      }
      for (const error of [between, during, classified]) expect(Deadline.isTimeUp(error)).toBe(true)
    }))

  it.effect("with Effect.catchIf it handles each of them, and only them", () =>
    Effect.gen(function*() {
      const fallback = <E>(effect: Effect.Effect<string, E>) =>
        effect.pipe(Effect.catchIf(Deadline.isTimeUp, (e) => Effect.succeed(`late: ${e._tag}`)))
      // the last two: two timers due at one instant, see above
      const cases: ReadonlyArray<[DurationInput, ReadonlyArray<string>]> = [
        ["950 millis", ["RetriesExhausted"]],
        ["5 seconds", ["DeadlineExceeded", "Fatal"]],
        ["500 millis", ["DeadlineExceeded", "Fatal"]]
      ]
      for (const [attempt, expected] of cases) {
        const fiber = yield* fork(fallback(hung(attempt, "1 second")))
        yield* TestClock.adjust("1 minute")
        expect(expected.map((tag) => `late: ${tag}`)).toContain(yield* Fiber.join(fiber))
      }
      // out of attempts with time left: not time up, the error stays
      const tooFew = Effect.fail(Failure.retryable(new Unavailable())).pipe(
        Retry.retry({ schedule: Backoff.exponential({ base: "1 millis", cap: "1 millis" }), maxAttempts: 2 }),
        Deadline.within("1 minute")
      )
      expect(yield* failureOf(fallback(tooFew))).toMatchObject({ _tag: "RetriesExhausted", reason: "attempts" })
    }))

  it.effect("a limiter wait that would pass the deadline is time up; one that would pass maxWait is not", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.fixedWindow({ limit: 1, window: "10 seconds" })
      yield* limiter.tryAcquire("k")
      const byDeadline = yield* Effect.flip(limiter.acquire("k").pipe(Deadline.within("1 second")))
      const byMaxWait = yield* Effect.flip(limiter.acquire("k", 1, { maxWait: "1 second" }))
      expect(byDeadline).toMatchObject({ _tag: "RateLimited", reason: "deadline" })
      expect(Deadline.isTimeUp(byDeadline)).toBe(true)
      expect(byMaxWait).toMatchObject({ _tag: "RateLimited", reason: "max-wait" })
      expect(Deadline.isTimeUp(byMaxWait)).toBe(false)
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))

  it("AttemptTimeout is not time up: the attempt ran out, not the caller's time", () => {
    const timeout = new Deadline.AttemptTimeout({ timeout: Duration.millis(300) })
    expect(Deadline.isTimeUp(timeout)).toBe(false)
    expect(Deadline.isTimeUp(Failure.fatal(timeout))).toBe(false)
    expect(Deadline.isTimeUp(new Retry.RetriesExhausted({ attempts: 3, reason: "attempts", last: timeout }))).toBe(
      false
    )
    for (const reason of ["budget", "retry-after"] as const) {
      expect(Deadline.isTimeUp(new Retry.RetriesExhausted({ attempts: 1, reason, last: 1 }))).toBe(false)
    }
    expect(Deadline.isTimeUp(Failure.retryable(new Deadline.DeadlineExceeded()))).toBe(true)
    for (const other of [undefined, null, "DeadlineExceeded", 0, {}, { _tag: "Fatal" }, new Unavailable()]) {
      expect(Deadline.isTimeUp(other)).toBe(false)
    }
  })

  it("narrows: catchIf removes DeadlineExceeded from the type, and keeps what may still fail otherwise", () => {
    const wired = hung("300 millis", "1 second")
    type Cause = Unavailable | Deadline.AttemptTimeout | Deadline.DeadlineExceeded
    expectTypeOf(wired).toEqualTypeOf<
      Effect.Effect<string, Failure.Fatal<Cause> | Retry.RetriesExhausted<Cause> | Deadline.DeadlineExceeded>
    >()
    const handled = wired.pipe(Effect.catchIf(Deadline.isTimeUp, () => Effect.succeed("late")))
    expectTypeOf(handled).toEqualTypeOf<Effect.Effect<string, Failure.Fatal<Cause> | Retry.RetriesExhausted<Cause>>>()
    const error = null as unknown
    if (Deadline.isTimeUp(error)) expectTypeOf(error).toEqualTypeOf<Deadline.TimeUpError>()
  })
})
