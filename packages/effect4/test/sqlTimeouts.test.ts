import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Exit, Fiber, Result } from "effect"
import { TestClock } from "effect/testing"
import { Timeouts } from "../src/internal/sqlTimeouts.js"

const timedOut = "timed out" as const

/** `timeouts.run(effect)` on the fiber's clock, failing with "timed out". */
const run = <A, E>(timeouts: Timeouts, effect: Effect.Effect<A, E>) =>
  Clock.clockWith((clock) => timeouts.run(effect, clock, () => timedOut))

const fork = <A, E>(effect: Effect.Effect<A, E>) => Effect.forkChild(Effect.result(effect), { startImmediately: true })

describe("IdempotencyStore/Sql timeouts (one sleeping fiber for all of a store's statements)", () => {
  it.effect("a statement that never answers fails at its deadline, even for an uninterruptible caller", () =>
    Effect.gen(function*() {
      const timeouts = new Timeouts(Duration.seconds(2))
      const stopped = yield* Deferred.make<void>()
      const statement = Effect.onInterrupt(Effect.never, () => Deferred.succeed(stopped, undefined))
      const caller = yield* Effect.forkChild(Effect.uninterruptible(Effect.result(run(timeouts, statement))), {
        startImmediately: true
      })
      yield* TestClock.adjust("1999 millis")
      expect(caller.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust("1 milli")
      expect(yield* Fiber.join(caller)).toEqual(Result.fail(timedOut))
      // the statement is interrupted in the background, not waited for
      yield* Deferred.await(stopped)
      expect(timeouts.sleeping).toBe(false)
    }))

  it.effect("callers waiting at once share one sleeping fiber, and each times out at its own deadline", () =>
    Effect.gen(function*() {
      const timeouts = new Timeouts(Duration.seconds(1))
      const callers: Array<Fiber.Fiber<Result.Result<never, typeof timedOut | Error>>> = []
      for (let i = 0; i < 3; i++) {
        callers.push(yield* fork(run(timeouts, Effect.never)))
        if (i < 2) yield* TestClock.adjust("300 millis")
      }
      expect(timeouts.starts).toBe(1)
      yield* TestClock.adjust("400 millis")
      expect(callers.map((f) => f.pollUnsafe() !== undefined)).toEqual([true, false, false])
      yield* TestClock.adjust("299 millis")
      expect(callers.map((f) => f.pollUnsafe() !== undefined)).toEqual([true, false, false])
      yield* TestClock.adjust("1 milli")
      expect(callers.map((f) => f.pollUnsafe() !== undefined)).toEqual([true, true, false])
      yield* TestClock.adjust("300 millis")
      for (const caller of callers) expect(yield* Fiber.join(caller)).toEqual(Result.fail(timedOut))
      expect(timeouts.sleeping).toBe(false)
      expect(timeouts.starts).toBe(1)
    }))

  it.effect("answers before the deadline are passed on, and an interrupted statement is a failure", () =>
    Effect.gen(function*() {
      const timeouts = new Timeouts(Duration.seconds(1))
      expect(yield* run(timeouts, Effect.succeed(1))).toBe(1)
      expect(timeouts.starts).toBe(0)
      const answer = yield* Deferred.make<number, string>()
      const slow = yield* fork(run(timeouts, Deferred.await(answer)))
      const failing = yield* Deferred.make<number, string>()
      const failed = yield* fork(run(timeouts, Deferred.await(failing)))
      const gone = yield* Deferred.make<void>()
      const interrupted = yield* fork(run(timeouts, Effect.andThen(Deferred.await(gone), Effect.interrupt)))
      yield* TestClock.adjust("500 millis")
      yield* Deferred.succeed(answer, 2)
      yield* Deferred.fail(failing, "boom")
      yield* Deferred.succeed(gone, undefined)
      expect(yield* Fiber.join(slow)).toEqual(Result.succeed(2))
      expect(yield* Fiber.join(failed)).toEqual(Result.fail("boom"))
      const result = yield* Fiber.join(interrupted)
      expect(Result.isFailure(result) && result.failure instanceof Error).toBe(true)
      // the sleeping fiber wakes at the old deadline, finds no one, and ends; the next caller starts another
      expect(timeouts.sleeping).toBe(true)
      yield* TestClock.adjust("500 millis")
      expect(timeouts.sleeping).toBe(false)
      const late = yield* fork(run(timeouts, Effect.never))
      expect(timeouts.starts).toBe(2)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(late)).toEqual(Result.fail(timedOut))
    }))

  it.effect("an interrupted caller leaves at once and interrupts its statement; the others keep their deadline", () =>
    Effect.gen(function*() {
      const timeouts = new Timeouts(Duration.seconds(1))
      const stopped = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(
        run(timeouts, Effect.onInterrupt(Effect.never, () => Deferred.succeed(stopped, undefined))),
        { startImmediately: true }
      )
      const second = yield* fork(run(timeouts, Effect.never))
      const exit = yield* Fiber.interrupt(first).pipe(Effect.andThen(Fiber.await(first)))
      expect(Exit.hasInterrupts(exit)).toBe(true)
      yield* Deferred.await(stopped)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(second)).toEqual(Result.fail(timedOut))
    }))

  it.effect("a caller on another clock than the sleeping fiber's gets a timer of its own", () =>
    Effect.gen(function*() {
      const timeouts = new Timeouts(Duration.seconds(1))
      const testClock = yield* Clock.clockWith(Effect.succeed)
      // the same time, but another clock: the shared fiber does not sleep for it
      const other: Clock.Clock = {
        currentTimeMillisUnsafe: () => testClock.currentTimeMillisUnsafe(),
        currentTimeMillis: testClock.currentTimeMillis,
        currentTimeNanosUnsafe: () => testClock.currentTimeNanosUnsafe(),
        currentTimeNanos: testClock.currentTimeNanos,
        monotonicTimeNanosUnsafe: () => testClock.monotonicTimeNanosUnsafe(),
        monotonicTimeNanos: testClock.monotonicTimeNanos,
        sleep: (duration) => testClock.sleep(duration)
      }
      const first = yield* fork(run(timeouts, Effect.never))
      yield* TestClock.adjust("500 millis")
      const second = yield* fork(Effect.provideService(run(timeouts, Effect.never), Clock.Clock, other))
      yield* TestClock.adjust("500 millis")
      expect(yield* Fiber.join(first)).toEqual(Result.fail(timedOut))
      expect(second.pollUnsafe()).toBeUndefined()
      expect(timeouts.starts).toBe(1)
      yield* TestClock.adjust("500 millis")
      expect(yield* Fiber.join(second)).toEqual(Result.fail(timedOut))
    }))

  it.effect("a deadline that comes before its caller has begun to wait still ends the wait", () =>
    Effect.gen(function*() {
      const timeouts = new Timeouts(Duration.millis(1))
      const testClock = yield* Clock.clockWith(Effect.succeed)
      // a clock that moves a millisecond at each reading: the sleeping fiber, started after the caller joined
      // the list and before it waits, finds its deadline passed already
      let nanos = 0n
      const hurried: Clock.Clock = {
        currentTimeMillisUnsafe: () => Number(nanos / 1_000_000n),
        currentTimeMillis: Effect.sync(() => Number(nanos / 1_000_000n)),
        currentTimeNanosUnsafe: () => nanos,
        currentTimeNanos: Effect.sync(() => nanos),
        monotonicTimeNanosUnsafe: () => (nanos += 1_000_000n),
        monotonicTimeNanos: Effect.sync(() => (nanos += 1_000_000n)),
        sleep: (duration) => testClock.sleep(duration)
      }
      const result = yield* Effect.result(Effect.provideService(run(timeouts, Effect.never), Clock.Clock, hurried))
      expect(result).toEqual(Result.fail(timedOut))
    }))

  it.effect("shutdown stops the sleeping fiber when no caller waits, and not while one does", () =>
    Effect.gen(function*() {
      const timeouts = new Timeouts(Duration.seconds(1))
      const answer = yield* Deferred.make<number>()
      const caller = yield* fork(run(timeouts, Deferred.await(answer)))
      const waiting = yield* fork(run(timeouts, Effect.never))
      yield* Deferred.succeed(answer, 1)
      expect(yield* Fiber.join(caller)).toEqual(Result.succeed(1))
      yield* timeouts.shutdown
      expect(timeouts.sleeping).toBe(true)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(waiting)).toEqual(Result.fail(timedOut))
      const next = yield* Deferred.make<number>()
      const last = yield* fork(run(timeouts, Deferred.await(next)))
      yield* Deferred.succeed(next, 2)
      expect(yield* Fiber.join(last)).toEqual(Result.succeed(2))
      expect(timeouts.sleeping).toBe(true)
      yield* timeouts.shutdown
      expect(timeouts.sleeping).toBe(false)
      const after = yield* fork(run(timeouts, Effect.never))
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(after)).toEqual(Result.fail(timedOut))
    }))
})
