import { currentScheduler, diedOf, fork, pollUnsafe, Tag, TestClock, withClockSkew, yieldNow } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Option } from "effect"
import { Deadline } from "effect-resilience"

const remainingMillis = Effect.map(Deadline.remaining, Option.map(Duration.toMillis))

/** Wraps `inner` in `depth` layers of `wrap`, built iteratively (a deep synchronous nesting). */
const nested = (depth: number, wrap: (e: Effect.Effect<number, unknown>) => Effect.Effect<number, unknown>) => {
  let effect: Effect.Effect<number, unknown> = Effect.succeed(depth)
  for (let i = 0; i < depth; i++) effect = wrap(effect)
  return effect
}

/** A recursion through a timed effect, as a paginated fetch writes it: each page's call is timed, and the next inside. */
const pages = (n: number, wrap: (e: Effect.Effect<number, unknown>) => Effect.Effect<number, unknown>) => {
  const page = (left: number): Effect.Effect<number, unknown> =>
    left === 0
      ? Effect.succeed(0)
      : Effect.andThen(yieldNow, Effect.suspend(() => page(left - 1))).pipe(wrap, Effect.map((x) => x + 1))
  return page(n)
}

/**
 * The TestClock's time plus `skew`, which a test bumps from inside its work: a synchronous stretch that takes
 * time (blocking work) without any sleep.
 */
const blockingClock = () => {
  const state = { skew: 0 }
  return {
    withClock: withClockSkew(() => state.skew),
    block: (millis: number) => Effect.sync(() => (state.skew += millis))
  }
}

const exceeded = Exit.fail(new Deadline.DeadlineExceeded())

describe("Deadline", () => {
  describe("within", () => {
    it.effect("interrupts slow work at the deadline, runs its finalizers, fails with DeadlineExceeded", () =>
      Effect.gen(function*() {
        let finalized = false
        const fiber = yield* Effect.sleep("10 seconds").pipe(
          Effect.ensuring(Effect.sync(() => {
            finalized = true
          })),
          Deadline.within("1 second"),
          fork
        )
        yield* TestClock.adjust("999 millis")
        expect(pollUnsafe(fiber)).toBeUndefined()
        yield* TestClock.adjust("1 millis")
        const exit = yield* Fiber.await(fiber)
        expect(exit).toEqual(exceeded)
        expect(finalized).toBe(true)
      }))

    it.effect("work that finishes in time is untouched", () =>
      Effect.gen(function*() {
        const fiber = yield* Effect.as(Effect.sleep("300 millis"), "done").pipe(
          Deadline.within("1 second"),
          fork
        )
        yield* TestClock.adjust("300 millis")
        expect(yield* Fiber.join(fiber)).toBe("done")
      }))

    it.effect("typed failures and defects pass through", () =>
      Effect.gen(function*() {
        expect(yield* Effect.exit(Deadline.within(Effect.fail("nope"), "1 second"))).toEqual(Exit.fail("nope"))
        const died = yield* Effect.exit(Deadline.within(Effect.die("bug"), "1 second"))
        expect(diedOf(died)).toBe(true)
      }))

    it.effect("remaining counts down and is none without a deadline", () =>
      Effect.gen(function*() {
        expect(yield* Deadline.remaining).toEqual(Option.none())
        const fiber = yield* fork(Deadline.within(
          Effect.andThen(Effect.sleep("300 millis"), remainingMillis),
          "1 second"
        ))
        yield* TestClock.adjust("300 millis")
        expect(yield* Fiber.join(fiber)).toEqual(Option.some(700))
      }))

    it.effect("remaining is never negative", () =>
      Effect.gen(function*() {
        // the deadline passes while an uninterruptible region holds the fiber
        let seen: Option.Option<number> = Option.none()
        const inside = yield* fork(Deadline.within(
          Effect.uninterruptible(Effect.andThen(
            Effect.sleep("2 seconds"),
            Effect.map(remainingMillis, (r) => {
              seen = r
            })
          )),
          "1 second"
        ))
        yield* TestClock.adjust("2 seconds")
        // the late result is discarded: the caller was promised an answer within the deadline
        expect(yield* Fiber.await(inside)).toEqual(exceeded)
        expect(seen).toEqual(Option.some(0))
      }))

    it.effect("a nested within never extends the outer deadline", () =>
      Effect.gen(function*() {
        const nested = yield* remainingMillis.pipe(Deadline.within("5 seconds"), Deadline.within("1 second"))
        expect(nested).toEqual(Option.some(1000))
        const tighter = yield* remainingMillis.pipe(Deadline.within("1 second"), Deadline.within("5 seconds"))
        expect(tighter).toEqual(Option.some(1000))
      }))

    it.effect("the outer deadline interrupts work under a longer inner within", () =>
      Effect.gen(function*() {
        const fiber = yield* Effect.sleep("10 seconds").pipe(
          Deadline.within("5 seconds"),
          Deadline.within("1 second"),
          fork
        )
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.await(fiber)).toEqual(exceeded)
      }))

    it.effect("forked fibers inherit the deadline", () =>
      Effect.gen(function*() {
        const seen = yield* Effect.gen(function*() {
          yield* Effect.sleep("100 millis")
          const child = yield* fork(remainingMillis)
          return yield* Fiber.join(child)
        }).pipe(Deadline.within("1 second"), fork)
        yield* TestClock.adjust("100 millis")
        expect(yield* Fiber.join(seen)).toEqual(Option.some(900))
      }))

    it.effect("a deadline does not leak out of within", () =>
      Effect.gen(function*() {
        yield* Deadline.within(Effect.void, "1 second")
        expect(yield* Deadline.remaining).toEqual(Option.none())
        expect(yield* Deadline.current).toEqual(Option.none())
      }))

    // live clock: nothing here waits for time, and TestClock's list of pending sleeps would add its own cost
    it.live("nests thousands deep, synchronously and through recursion, in linear cost", () =>
      Effect.gen(function*() {
        // Effect 3: a scheduler chain grew with every level before: 600 synchronous levels hung, and recursion
        // slowed quadratically and crashed near 7,400 levels. Effect 4 starts the timed work and resumes a callback
        // wait on the stack of whoever resumes it: without its depth guards (internal/timeout.ts, resume.ts)
        // 1,000 synchronous levels overflowed the stack, 2,000 when only resume.ts's was missing
        expect(yield* nested(1_000, Deadline.within("1 hour"))).toBe(1_000)
        expect(yield* nested(5_000, Deadline.within("1 hour"))).toBe(5_000)
        expect(yield* pages(2_000, Deadline.within("1 hour"))).toBe(2_000)
      }), 60_000)

    it.effect("after a blocking stretch, fires at the deadline, not a whole budget later", () =>
      Effect.gen(function*() {
        const { block, withClock } = blockingClock()
        // 300 ms of synchronous work under a 100 ms deadline: the deadline passed during it; nothing is left
        const fiber = yield* Effect.andThen(block(300), Effect.never).pipe(
          Deadline.within("100 millis"),
          withClock,
          fork
        )
        yield* TestClock.adjust("1 millis")
        expect(pollUnsafe(fiber)).toEqual(exceeded)
        // 60 ms of work under a 100 ms deadline: 40 ms are left, not 100
        const second = yield* Effect.andThen(block(60), Effect.never).pipe(
          Deadline.within("100 millis"),
          withClock,
          fork
        )
        yield* TestClock.adjust("39 millis")
        expect(pollUnsafe(second)).toBeUndefined()
        yield* TestClock.adjust("1 millis")
        expect(pollUnsafe(second)).toEqual(exceeded)
      }))

    it.effect("a zero budget fails at once without running the work", () =>
      Effect.gen(function*() {
        let ran = false
        const exit = yield* Effect.exit(Deadline.within(
          Effect.sync(() => {
            ran = true
          }),
          0
        ))
        expect(exit).toEqual(exceeded)
        expect(ran).toBe(false)
      }))

    it.effect("withDeadlineAt takes an absolute instant and never extends the current one", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(10_000)
        expect(yield* Deadline.withDeadlineAt(remainingMillis, 10_250)).toEqual(Option.some(250))
        const nested = yield* Deadline.withDeadlineAt(remainingMillis, 20_000).pipe(Deadline.within("1 second"))
        expect(nested).toEqual(Option.some(1000))
      }))
  })

  describe("timeout", () => {
    it.effect("fails with AttemptTimeout when its own duration runs out first", () =>
      Effect.gen(function*() {
        let interrupted = false
        const fiber = yield* Effect.never.pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              interrupted = true
            })
          ),
          Deadline.timeout("200 millis"),
          Deadline.within("1 second"),
          fork
        )
        yield* TestClock.adjust("200 millis")
        const exit = yield* Fiber.await(fiber)
        expect(exit).toEqual(Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.millis(200) })))
        expect(interrupted).toBe(true)
      }))

    it.effect("fails with DeadlineExceeded when the deadline is closer than the timeout", () =>
      Effect.gen(function*() {
        const fiber = yield* Effect.never.pipe(
          Deadline.timeout("5 seconds"),
          Deadline.within("1 second"),
          fork
        )
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.await(fiber)).toEqual(exceeded)
      }))

    it.effect("is clipped to what is left of the deadline", () =>
      Effect.gen(function*() {
        const fiber = yield* Effect.gen(function*() {
          yield* Effect.sleep("800 millis")
          return yield* Effect.exit(Deadline.timeout(Effect.never, "500 millis"))
        }).pipe(Deadline.within("1 second"), fork)
        yield* TestClock.adjust("800 millis")
        yield* TestClock.adjust("199 millis")
        expect(pollUnsafe(fiber)).toBeUndefined()
        yield* TestClock.adjust("1 millis")
        // both timers are due at 1000: Effect 3's TestClock woke the inner one first (the attempt's exit is
        // DeadlineExceeded), Effect 4's wakes the outer one (the whole call fails with it). Either way the
        // deadline, not the 500 ms, ended the attempt
        const exit = yield* Fiber.await(fiber)
        expect([Exit.succeed(exceeded), exceeded]).toContainEqual(exit)
      }))

    it.effect("does not start the attempt when the deadline has passed", () =>
      Effect.gen(function*() {
        let ran = false
        const exit = yield* Effect.gen(function*() {
          yield* Effect.uninterruptible(Effect.sleep("2 seconds"))
          return yield* Effect.exit(Deadline.timeout(
            Effect.sync(() => {
              ran = true
            }),
            "1 second"
          ))
        }).pipe(Deadline.within("1 second"), fork)
        yield* TestClock.adjust("2 seconds")
        const result = yield* Fiber.await(exit)
        expect(ran).toBe(false)
        expect(Exit.isFailure(result)).toBe(true)
      }))

    it.effect("without a deadline it is a plain per-attempt timeout", () =>
      Effect.gen(function*() {
        const slow = yield* fork(Deadline.timeout(Effect.never, "50 millis"))
        yield* TestClock.adjust("50 millis")
        expect(yield* Fiber.await(slow)).toEqual(
          Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.millis(50) }))
        )
        const fast = yield* fork(Deadline.timeout(Effect.as(Effect.sleep("10 millis"), 1), "50 millis"))
        yield* TestClock.adjust("10 millis")
        expect(yield* Fiber.join(fast)).toBe(1)
      }))

    it.effect("synchronous work returns its own exit (success, failure, defect)", () =>
      Effect.gen(function*() {
        expect(yield* Deadline.timeout(Effect.succeed(1), "1 second")).toBe(1)
        expect(yield* Effect.exit(Deadline.timeout(Effect.fail("e"), "1 second"))).toEqual(Exit.fail("e"))
        const died = yield* Effect.exit(Deadline.timeout(Effect.die("bug"), "1 second"))
        expect(diedOf(died)).toBe(true)
      }))

    it.effect("interrupting the caller interrupts the attempt and waits for its finalizers", () =>
      Effect.gen(function*() {
        let finalized = false
        const fiber = yield* Effect.never.pipe(
          Effect.ensuring(Effect.sync(() => {
            finalized = true
          })),
          Deadline.timeout("10 seconds"),
          fork
        )
        yield* TestClock.adjust("1 second")
        yield* Fiber.interrupt(fiber)
        expect(finalized).toBe(true)
      }))

    it.effect("works for an uninterruptible caller whose work is interruptible (as in an HTTP app)", () =>
      Effect.gen(function*() {
        const fiber = yield* Effect.interruptible(Effect.never).pipe(
          Deadline.timeout("1 second"),
          Effect.uninterruptible,
          fork
        )
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.await(fiber)).toEqual(
          Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.millis(1000) }))
        )
      }))

    it.effect("leaves the caller's scheduler and context alone (many sequential calls do not stall)", () =>
      Effect.gen(function*() {
        let sum = 0
        for (let i = 0; i < 5_000; i++) sum += yield* Deadline.timeout(Effect.succeed(1), "1 second")
        expect(sum).toBe(5_000)
        // the timed work runs on the caller's scheduler and sees the caller's services; the caller stays on it
        const outside = yield* currentScheduler
        const Name = Tag<string>("Deadline.test/Name")
        const inside = yield* Deadline.timeout(Effect.all([currentScheduler, Name]), "1 second").pipe(
          Effect.provideService(Name, "caller's")
        )
        expect(inside[0]).toBe(outside)
        expect(inside[1]).toBe("caller's")
        expect(yield* currentScheduler).toBe(outside)
      }))

    it.live("nests thousands deep, synchronously and through recursion, in linear cost", () =>
      Effect.gen(function*() {
        expect(yield* nested(1_000, Deadline.timeout("1 hour"))).toBe(1_000)
        expect(yield* nested(5_000, Deadline.timeout("1 hour"))).toBe(5_000)
        expect(yield* pages(8_000, Deadline.timeout("1 hour"))).toBe(8_000)
      }), 60_000)

    it.effect("after a blocking stretch, fires when its own time is up", () =>
      Effect.gen(function*() {
        const { block, withClock } = blockingClock()
        const fiber = yield* Effect.andThen(block(300), Effect.never).pipe(
          Deadline.timeout("100 millis"),
          withClock,
          fork
        )
        yield* TestClock.adjust("1 millis")
        expect(pollUnsafe(fiber)).toEqual(Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.millis(100) })))
      }))

    it.effect("a zero timeout has already expired: the work does not run", () =>
      Effect.gen(function*() {
        let ran = false
        const work = Effect.sync(() => {
          ran = true
        })
        expect(yield* Effect.exit(Deadline.timeout(work, 0))).toEqual(
          Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.zero }))
        )
        expect(yield* Effect.exit(Deadline.timeout(work, 0).pipe(Deadline.within("1 second")))).toEqual(
          Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.zero }))
        )
        expect(ran).toBe(false)
      }))
  })

  it("rejects negative and NaN durations when built", () => {
    expect(() => Deadline.within(-1)).toThrow(/non-negative/)
    expect(() => Deadline.timeout(NaN)).toThrow(/non-negative/)
    expect(() => Deadline.timeout("-3 seconds")).toThrow(/non-negative/)
  })

  it.effect("accepts every unit Duration knows, nanos and micros included", () =>
    Effect.gen(function*() {
      // "500000 nanos" was rejected: the NaN check matched the "nan" in "nanos"
      const fiber = yield* fork(Deadline.timeout(Effect.never, "500000 nanos"))
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.await(fiber)).toEqual(
        Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.millis(0.5) }))
      )
      expect(yield* remainingMillis.pipe(Deadline.within("2000 micros"))).toEqual(Option.some(2))
    }))
})
