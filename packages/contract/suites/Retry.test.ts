import { counterValue, diedOf, type DurationInput, fork, interruptedOf, TestClock, upTo, withRandom } from "#edition"
import { describe, expect, expectTypeOf, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Schedule } from "effect"
import { Backoff, Deadline, Failure, Retry, RetryBudget } from "effect-resilience"

const exponential = Backoff.exponential({ base: "100 millis", cap: "10 seconds" })

/** An effect that records the Clock instant of every call and fails with `failures[i]` (or succeeds). */
const scripted = <E>(failures: ReadonlyArray<E>) => {
  const instants: Array<number> = []
  const effect = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const i = instants.push(now) - 1
    return i < failures.length ? Effect.fail(failures[i]!) : Effect.succeed(`ok after ${i + 1}`)
  })
  return { effect, instants }
}

/** A succeeding call whose error channel says it may be retried. */
const ok = <A>(a: A): Effect.Effect<A, Failure.Retryable<string>> => Effect.succeed(a)

const runFor = <A, E>(effect: Effect.Effect<A, E>, time: DurationInput) =>
  Effect.gen(function*() {
    const fiber = yield* fork(effect)
    yield* TestClock.adjust(time)
    return yield* Fiber.await(fiber)
  })

describe("Retry.retry", () => {
  it.effect("the success path runs the effect exactly once and never sleeps", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted<Failure.Retryable<string>>([])
      const result = yield* Retry.retry(effect, { schedule: exponential, maxAttempts: 5 })
      expect(result).toBe("ok after 1")
      expect(instants).toEqual([0])
    }))

  it.effect("every call of one policy runs the schedule from its start", () =>
    Effect.gen(function*() {
      const policy = Retry.retry({ schedule: exponential, maxAttempts: 4 })
      for (let i = 0; i < 2; i++) {
        const { effect, instants } = scripted(["a", "b", "c"].map((c) => Failure.retryable(c)))
        const start = yield* Clock.currentTimeMillis
        yield* runFor(policy(effect), "1 minute")
        expect(instants.map((t) => t - start)).toEqual([0, 100, 300, 700])
      }
    }))

  it.effect("retries Retryable failures at the schedule's instants", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted([Failure.retryable("a"), Failure.retryable("b"), Failure.retryable("c")])
      const exit = yield* runFor(Retry.retry(effect, { schedule: exponential, maxAttempts: 5 }), "1 minute")
      expect(exit).toEqual(Exit.succeed("ok after 4"))
      expect(instants).toEqual([0, 100, 300, 700])
    }))

  it.effect("maxAttempts counts the first call; exhaustion says why and carries the last cause", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted(["a", "b", "c", "d", "e"].map((c) => Failure.retryable(c)))
      const exit = yield* runFor(Retry.retry(effect, { schedule: exponential, maxAttempts: 4 }), "1 minute")
      expect(exit).toEqual(Exit.fail(new Retry.RetriesExhausted({ attempts: 4, reason: "attempts", last: "d" })))
      expect(instants).toEqual([0, 100, 300, 700])
    }))

  it.effect("a schedule that ends stops with reason attempts", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted(["a", "b", "c"].map((c) => Failure.retryable(c)))
      const schedule = upTo(exponential, "150 millis")
      const exit = yield* runFor(Retry.retry(effect, { schedule, maxAttempts: 10 }), "1 minute")
      // upTo counts from the first failure: at 300 the elapsed 300 ms is past 150, so no third retry
      expect(exit).toEqual(Exit.fail(new Retry.RetriesExhausted({ attempts: 3, reason: "attempts", last: "c" })))
      expect(instants).toEqual([0, 100, 300])
    }))

  it.effect("Retry-After wins over a shorter backoff", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted([Failure.retryable("busy", "2 seconds"), Failure.retryable("x")])
      const exit = yield* runFor(Retry.retry(effect, { schedule: exponential, maxAttempts: 5 }), "1 minute")
      expect(exit._tag).toBe("Success")
      // 2000 (server) instead of 100 (backoff), then the backoff's second delay, 200
      expect(instants).toEqual([0, 2000, 2200])
    }))

  it.effect("a longer backoff wins over a shorter Retry-After", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted([Failure.retryable("busy", "10 millis")])
      yield* runFor(Retry.retry(effect, { schedule: exponential, maxAttempts: 5 }), "1 minute")
      expect(instants).toEqual([0, 100])
    }))

  it.effect("a Retry-After above maxRetryAfter stops at once", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted([Failure.retryable("busy", "2 minutes")])
      const exit = yield* Effect.exit(Retry.retry(effect, { schedule: exponential, maxAttempts: 5 }))
      expect(exit).toEqual(Exit.fail(new Retry.RetriesExhausted({ attempts: 1, reason: "retry-after", last: "busy" })))
      expect(instants).toEqual([0])
      const custom = scripted([Failure.retryable("busy", "2 seconds")])
      const capped = yield* Effect.exit(
        Retry.retry(custom.effect, { schedule: exponential, maxAttempts: 5, maxRetryAfter: "1 second" })
      )
      expect(capped).toEqual(
        Exit.fail(new Retry.RetriesExhausted({ attempts: 1, reason: "retry-after", last: "busy" }))
      )
    }))

  it.effect("stops before sleeping past the deadline, without sleeping", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted(["a", "b", "c", "d"].map((c) => Failure.retryable(c)))
      const fiber = yield* fork(
        Retry.retry(effect, { schedule: exponential, maxAttempts: 10 }).pipe(Deadline.within("250 millis"))
      )
      yield* TestClock.adjust("100 millis")
      // after the second failure at 100 the next delay is 200: 300 >= 250, so it stops right now
      const exit = yield* Fiber.await(fiber)
      expect(exit).toEqual(Exit.fail(new Retry.RetriesExhausted({ attempts: 2, reason: "deadline", last: "b" })))
      expect(instants).toEqual([0, 100])
      expect(yield* Clock.currentTimeMillis).toBe(100)
    }))

  it.effect("a retry landing exactly on the deadline is not attempted", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted([Failure.retryable("a")])
      const exit = yield* Effect.exit(
        Retry.retry(effect, { schedule: exponential, maxAttempts: 10 }).pipe(Deadline.within("100 millis"))
      )
      expect(exit).toEqual(Exit.fail(new Retry.RetriesExhausted({ attempts: 1, reason: "deadline", last: "a" })))
      expect(instants).toEqual([0])
    }))

  it.effect("a RetryBudget in the context stops retries (maxTokens 4: two calls in all)", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted(["a", "b", "c", "d"].map((c) => Failure.retryable(c)))
      const exit = yield* runFor(
        Retry.retry(effect, { schedule: exponential, maxAttempts: 10 }).pipe(
          Effect.provide(RetryBudget.layer({ maxTokens: 4, tokenRatio: 0.1 }))
        ),
        "1 minute"
      )
      expect(exit).toEqual(Exit.fail(new Retry.RetriesExhausted({ attempts: 2, reason: "budget", last: "b" })))
      expect(instants).toEqual([0, 100])
    }))

  it.effect("successes refill the shared budget", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.RetryBudget
      const policy = Retry.retry({ schedule: exponential, maxAttempts: 3 })
      yield* Effect.exit(runFor(policy(Effect.fail(Failure.retryable("x"))), "1 minute"))
      expect(yield* budget.tokens).toBe(7) // 10 - 3 failed attempts
      yield* policy(ok(1))
      yield* policy(ok(1))
      expect(yield* budget.tokens).toBe(8)
    }).pipe(Effect.provide(RetryBudget.layer({ maxTokens: 10, tokenRatio: 0.5 }))))

  it.effect("Fatal and other typed failures pass through at once, unchanged", () =>
    Effect.gen(function*() {
      const fatal = Failure.fatal("404")
      const a = scripted<Failure.Fatal<string> | Failure.Retryable<string>>([fatal])
      expect(yield* Effect.exit(Retry.retry(a.effect, { schedule: exponential, maxAttempts: 5 }))).toEqual(
        Exit.fail(fatal)
      )
      expect(a.instants).toEqual([0])
      const b = scripted<{ readonly _tag: "Other" } | Failure.Retryable<string>>([{ _tag: "Other" }])
      const exit = yield* Effect.exit(Retry.retry(b.effect, { schedule: exponential, maxAttempts: 5 }))
      expect(exit).toEqual(Exit.fail({ _tag: "Other" }))
      expect(b.instants).toEqual([0])
    }))

  it.effect("defects are not retried", () =>
    Effect.gen(function*() {
      let calls = 0
      const exit = yield* Effect.exit(Retry.retry(
        Effect.suspend((): Effect.Effect<never, Failure.Retryable<string>> => {
          calls++
          return Effect.die("bug")
        }),
        { schedule: exponential, maxAttempts: 5 }
      ))
      expect(diedOf(exit)).toBe(true)
      expect(calls).toBe(1)
    }))

  it.effect("interruption is not retried", () =>
    Effect.gen(function*() {
      let calls = 0
      const exit = yield* Effect.exit(Retry.retry(
        Effect.suspend((): Effect.Effect<never, Failure.Retryable<string>> => {
          calls++
          return Effect.interrupt
        }),
        { schedule: exponential, maxAttempts: 5 }
      ))
      expect(interruptedOf(exit)).toBe(true)
      expect(calls).toBe(1)
    }))

  it.effect("interrupting a retry while it sleeps stops it", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted(["a", "b", "c"].map((c) => Failure.retryable(c)))
      const fiber = yield* fork(Retry.retry(effect, { schedule: exponential, maxAttempts: 10 }))
      yield* TestClock.adjust("50 millis")
      yield* Fiber.interrupt(fiber)
      yield* TestClock.adjust("1 minute")
      expect(instants).toEqual([0])
    }))

  it.effect("onRetry sees every retry; metrics count retries and give-ups", () =>
    Effect.gen(function*() {
      const events: Array<[number, number]> = []
      const before = yield* counterValue(Retry.retriesTotal)
      const { effect } = scripted(["a", "b", "c"].map((c) => Failure.retryable(c)))
      yield* runFor(
        Retry.retry(effect, {
          schedule: exponential,
          maxAttempts: 3,
          onRetry: (e) => Effect.sync(() => events.push([e.attempt, Duration.toMillis(e.delay)]))
        }),
        "1 minute"
      )
      expect(events).toEqual([[1, 100], [2, 200]])
      expect((yield* counterValue(Retry.retriesTotal)) - before).toBe(2)
      expect(yield* counterValue(Retry.exhaustedTotal, { reason: "attempts" })).toBeGreaterThanOrEqual(1)
    }))

  it.effect("a jittered schedule is driven by Random", () =>
    Effect.gen(function*() {
      const { effect, instants } = scripted(["a", "b"].map((c) => Failure.retryable(c)))
      const schedule = Backoff.fullJitter({ base: "100 millis", cap: "1 second" })
      yield* runFor(Retry.retry(effect, { schedule, maxAttempts: 5 }), "1 minute")
      expect(instants).toEqual([0, 50, 100]) // 0.5*100, then 0.25*200
    }).pipe(withRandom([0.5, 0.25])))

  it.effect("takes any Schedule: only its delays count, whatever it outputs", () =>
    Effect.gen(function*() {
      // each run starts where the clock is; its instants are counted from there
      const run = (schedule: Retry.Options["schedule"], maxAttempts = 4) =>
        Effect.gen(function*() {
          const { effect, instants } = scripted(["a", "b", "c", "d", "e"].map((c) => Failure.retryable(c)))
          const start = yield* Clock.currentTimeMillis
          const exit = yield* runFor(Retry.retry(effect, { schedule, maxAttempts }), "1 minute")
          return { exit, instants: instants.map((t) => t - start) }
        })
      // Schedule.spaced and Schedule.fixed output a count; the delays are what they space
      expect((yield* run(Schedule.spaced("100 millis"))).instants).toEqual([0, 100, 200, 300])
      expect((yield* run(Schedule.fixed("100 millis"))).instants).toEqual([0, 100, 200, 300])
      // Schedule.exponential outputs the delay, as Backoff's schedules do
      expect((yield* run(Schedule.exponential("100 millis"))).instants).toEqual([0, 100, 300, 700])
      // Schedule.recurs: no delay, and its end stops the retries before maxAttempts does
      const recurs = yield* run(Schedule.recurs(2), 10)
      expect(recurs.instants).toEqual([0, 0, 0])
      expect(recurs.exit).toEqual(
        Exit.fail(new Retry.RetriesExhausted({ attempts: 3, reason: "attempts", last: "c" }))
      )
    }))

  it("accepts Effect's own schedules, whatever their output type", () => {
    const policy = (schedule: Retry.Options["schedule"]) => Retry.retry({ schedule, maxAttempts: 3 })
    expectTypeOf(Schedule.spaced("1 second")).toExtend<Retry.Options["schedule"]>()
    expectTypeOf(Schedule.fixed("1 second")).toExtend<Retry.Options["schedule"]>()
    expectTypeOf(Schedule.recurs(3)).toExtend<Retry.Options["schedule"]>()
    expectTypeOf(Schedule.exponential("100 millis")).toExtend<Retry.Options["schedule"]>()
    expectTypeOf(exponential).toExtend<Retry.Options["schedule"]>()
    const call = Effect.fail(Failure.retryable(503)) as Effect.Effect<string, Failure.Retryable<number>>
    const spaced = call.pipe(Retry.retry({ schedule: Schedule.spaced("1 second"), maxAttempts: 3 }))
    expectTypeOf(spaced).toEqualTypeOf<Effect.Effect<string, Retry.RetriesExhausted<number>>>()
    call.pipe(Retry.retry({ schedule: Schedule.fixed("1 second"), maxAttempts: 3 }))
    call.pipe(Retry.retry({ schedule: Schedule.recurs(2), maxAttempts: 3 }))
    call.pipe(policy(Schedule.exponential("100 millis")))
  })

  it("removes Retryable from the error type and adds RetriesExhausted", () => {
    class NotFound {
      readonly _tag = "NotFound"
    }
    const call = Effect.fail(Failure.retryable(503)) as Effect.Effect<string, Failure.Retryable<number> | NotFound>
    const retried = Retry.retry(call, { schedule: exponential, maxAttempts: 3 })
    expectTypeOf(retried).toEqualTypeOf<Effect.Effect<string, NotFound | Retry.RetriesExhausted<number>>>()
  })

  it("does not compile on an error type with nothing Retryable in it, in either form", () => {
    class NotFound {
      readonly _tag = "NotFound"
    }
    const policy = { schedule: exponential, maxAttempts: 3 }
    const unclassified = Effect.fail(new NotFound()) as Effect.Effect<string, NotFound>
    // @ts-expect-error Retry.retry: nothing in this error type is Retryable (classify first)
    Retry.retry(unclassified, policy)
    // @ts-expect-error Retry.retry: nothing in this error type is Retryable (classify first)
    unclassified.pipe(Retry.retry(policy))
    // @ts-expect-error an effect that cannot fail has nothing to retry either
    Effect.succeed(1).pipe(Retry.retry(policy))
    // classified, it compiles: NotFound becomes Fatal, and only RetriesExhausted or Fatal remain
    const classified = unclassified.pipe(Failure.retryWhen(() => false), Retry.retry(policy))
    expectTypeOf(classified).toEqualTypeOf<
      Effect.Effect<string, Failure.Fatal<NotFound> | Retry.RetriesExhausted<NotFound>>
    >()
  })

  it("does not compile on an error typed unknown or any: nothing there is known to be Retryable", () => {
    const policy = { schedule: exponential, maxAttempts: 3 }
    // `catch: (e) => e` types the error unknown: it compiled and never retried before
    const untyped = Effect.tryPromise({ try: () => Promise.resolve("ok"), catch: (e) => e })
    // @ts-expect-error Retry.retry: nothing in this error type is Retryable (classify first)
    untyped.pipe(Retry.retry(policy))
    // @ts-expect-error Retry.retry: nothing in this error type is Retryable (classify first)
    Retry.retry(untyped, policy)
    const loose = untyped as Effect.Effect<string, any>
    // @ts-expect-error Retry.retry: nothing in this error type is Retryable (classify first)
    loose.pipe(Retry.retry(policy))
    // @ts-expect-error Retry.retry: nothing in this error type is Retryable (classify first)
    Retry.retry(loose, policy)
    // classified, both compile
    const classified = untyped.pipe(Failure.retryWhen(() => true), Retry.retry(policy))
    expectTypeOf(classified).toEqualTypeOf<
      Effect.Effect<string, Failure.Fatal<unknown> | Retry.RetriesExhausted<unknown>>
    >()
    loose.pipe(Failure.retryWhen(() => true), Retry.retry(policy))
  })

  it("rejects bad options when the policy is built", () => {
    expect(() => Retry.retry({ schedule: exponential, maxAttempts: 0 })).toThrow(/maxAttempts/)
    expect(() => Retry.retry({ schedule: exponential, maxAttempts: 1.5 })).toThrow(/maxAttempts/)
    expect(() => Retry.retry({ schedule: exponential, maxAttempts: NaN })).toThrow(/maxAttempts/)
    expect(() => Retry.retry({ schedule: exponential, maxAttempts: 3, maxRetryAfter: -1 })).toThrow(/maxRetryAfter/)
    expect(() => Retry.retry(ok(undefined), { schedule: exponential, maxAttempts: -2 })).toThrow(/maxAttempts/)
  })
})
