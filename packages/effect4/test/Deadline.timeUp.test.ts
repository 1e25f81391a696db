import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { Backoff, Deadline, Failure, Retry } from "../src/index.js"

class Unavailable {
  readonly _tag = "Unavailable"
}

/** The README's wiring around a call that never answers: per-attempt timeout, retries, a deadline on it all. */
const hung = (attempt: Duration.Input, total: Duration.Input) =>
  (Effect.never as Effect.Effect<string, Unavailable>).pipe(
    Deadline.timeout(attempt),
    Failure.retryWhen((e) => e._tag === "AttemptTimeout" || e._tag === "Unavailable"),
    Retry.retry({ schedule: Backoff.exponential({ base: "100 millis", cap: "100 millis" }), maxAttempts: 10 }),
    Deadline.within(total)
  )

/** Runs `effect` to its end under the TestClock and returns its failure. */
const failureOf = <E>(effect: Effect.Effect<unknown, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(Effect.flip(effect))
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
      const cases: ReadonlyArray<[Duration.Input, ReadonlyArray<string>]> = [
        ["950 millis", ["RetriesExhausted"]],
        ["5 seconds", ["DeadlineExceeded", "Fatal"]],
        ["500 millis", ["DeadlineExceeded", "Fatal"]]
      ]
      for (const [attempt, expected] of cases) {
        const fiber = yield* Effect.forkChild(fallback(hung(attempt, "1 second")))
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

  // the rate limiter is not ported to this edition yet: its two errors, as it builds them (isTimeUp reads tag and reason)
  it("a limiter's RateLimited is time up with reason deadline, not with max-wait", () => {
    const rateLimited = (reason: string) => ({ _tag: "RateLimited", reason, limit: 1, retryAfter: Duration.seconds(9) })
    expect(Deadline.isTimeUp(rateLimited("deadline"))).toBe(true)
    expect(Deadline.isTimeUp(rateLimited("max-wait"))).toBe(false)
  })

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
