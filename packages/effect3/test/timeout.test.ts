import { describe, expect, it } from "@effect/vitest"
import { Chunk, Clock, Deferred, Duration, Effect, Either, Exit, Fiber, TestClock } from "effect"
import { DisconnectedTimeouts } from "../src/internal/timeout.js"

const timedOut = "timed out" as const

/** The instants of the sleeps pending on the TestClock. */
const sleeps = Effect.map(TestClock.sleeps(), Chunk.toReadonlyArray)

// Each case for callers that can be interrupted and for callers that cannot (a shorter path of their own)
const callers = [
  { name: "interruptible callers", uninterruptible: false },
  { name: "uninterruptible callers", uninterruptible: true }
] as const

describe.each(callers)("DisconnectedTimeouts (one sleeping fiber for many timed operations), $name", (
  { uninterruptible }
) => {
  /** `timeouts.run(effect)` on the fiber's clock, failing with "timed out", from a caller of this suite's kind. */
  const run = <A, E>(timeouts: DisconnectedTimeouts, effect: Effect.Effect<A, E>) => {
    const timed = Effect.clockWith((clock) => timeouts.run(effect, clock, () => timedOut))
    return uninterruptible ? Effect.uninterruptible(timed) : timed
  }

  it.effect("an operation that never answers fails at its deadline, even for an uninterruptible caller", () =>
    Effect.gen(function*() {
      const timeouts = new DisconnectedTimeouts(Duration.seconds(2))
      const stopped = yield* Deferred.make<void>()
      const operation = Effect.onInterrupt(Effect.never, () => Deferred.succeed(stopped, undefined))
      const caller = yield* Effect.fork(Effect.uninterruptible(Effect.either(run(timeouts, operation))))
      yield* TestClock.adjust("1999 millis")
      expect(caller.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 milli")
      expect(yield* Fiber.join(caller)).toEqual(Either.left(timedOut))
      // the operation is interrupted in the background, not waited for
      yield* Deferred.await(stopped)
      // nothing waits: the sleeping fiber has ended
      expect(timeouts.sleeping).toBe(false)
    }))

  it.effect("callers waiting at once share one sleep, and each times out at its own deadline", () =>
    Effect.gen(function*() {
      const timeouts = new DisconnectedTimeouts(Duration.seconds(1))
      const callers: Array<Fiber.RuntimeFiber<Either.Either<never, typeof timedOut>>> = []
      for (let i = 0; i < 3; i++) {
        callers.push(yield* Effect.fork(Effect.either(run(timeouts, Effect.never))))
        yield* Effect.yieldNow()
        if (i < 2) yield* TestClock.adjust("300 millis")
      }
      expect(timeouts.starts).toBe(1)
      expect(yield* sleeps).toHaveLength(1)
      // at 1000 the first, at 1300 the second, at 1600 the third
      yield* TestClock.adjust("400 millis")
      expect(callers.map((f) => f.unsafePoll() !== null)).toEqual([true, false, false])
      yield* TestClock.adjust("299 millis")
      expect(callers.map((f) => f.unsafePoll() !== null)).toEqual([true, false, false])
      yield* TestClock.adjust("1 milli")
      expect(callers.map((f) => f.unsafePoll() !== null)).toEqual([true, true, false])
      yield* TestClock.adjust("300 millis")
      for (const caller of callers) expect(yield* Fiber.join(caller)).toEqual(Either.left(timedOut))
      expect(timeouts.sleeping).toBe(false)
      expect(timeouts.starts).toBe(1)
    }))

  it.effect("answers before the deadline are passed on, values and failures, and leave no timeout behind", () =>
    Effect.gen(function*() {
      const timeouts = new DisconnectedTimeouts(Duration.seconds(1))
      // at once: no sleep at all
      expect(yield* run(timeouts, Effect.succeed(1))).toBe(1)
      expect(timeouts.starts).toBe(0)
      const answer = yield* Deferred.make<number, string>()
      const slow = yield* Effect.fork(Effect.either(run(timeouts, Deferred.await(answer))))
      const failing = yield* Deferred.make<number, string>()
      const failed = yield* Effect.fork(Effect.either(run(timeouts, Deferred.await(failing))))
      yield* Effect.yieldNow()
      yield* TestClock.adjust("500 millis")
      yield* Deferred.succeed(answer, 2)
      yield* Deferred.fail(failing, "boom")
      expect(yield* Fiber.join(slow)).toEqual(Either.right(2))
      expect(yield* Fiber.join(failed)).toEqual(Either.left("boom"))
      // the sleeping fiber wakes at the old deadline, finds no one, and ends
      expect(timeouts.sleeping).toBe(true)
      yield* TestClock.adjust("500 millis")
      expect(timeouts.sleeping).toBe(false)
      // and the next caller starts another
      const late = yield* Effect.fork(Effect.either(run(timeouts, Effect.never)))
      yield* Effect.yieldNow()
      expect(timeouts.starts).toBe(2)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(late)).toEqual(Either.left(timedOut))
    }))

  // (a caller that cannot be interrupted has no such case)
  it.effect.skipIf(uninterruptible)(
    "an interrupted caller leaves at once and interrupts its operation; the others keep their deadline",
    () =>
      Effect.gen(function*() {
        const timeouts = new DisconnectedTimeouts(Duration.seconds(1))
        const stopped = yield* Deferred.make<void>()
        const first = yield* Effect.fork(
          run(timeouts, Effect.onInterrupt(Effect.never, () => Deferred.succeed(stopped, undefined)))
        )
        const second = yield* Effect.fork(Effect.either(run(timeouts, Effect.never)))
        yield* Effect.yieldNow()
        const exit = yield* Fiber.interrupt(first)
        expect(Exit.isInterrupted(exit)).toBe(true)
        yield* Deferred.await(stopped)
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.join(second)).toEqual(Either.left(timedOut))
      })
  )

  it.effect("a caller on another clock than the sleeping fiber's gets a timer of its own", () =>
    Effect.gen(function*() {
      const timeouts = new DisconnectedTimeouts(Duration.seconds(1))
      const testClock = yield* Effect.clock
      // the same time, but another clock: the shared fiber cannot sleep for it
      const other: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => testClock.unsafeCurrentTimeMillis(),
        unsafeCurrentTimeNanos: () => testClock.unsafeCurrentTimeNanos(),
        currentTimeMillis: testClock.currentTimeMillis,
        currentTimeNanos: testClock.currentTimeNanos,
        sleep: (duration) => testClock.sleep(duration)
      }
      const first = yield* Effect.fork(Effect.either(run(timeouts, Effect.never)))
      yield* Effect.yieldNow()
      yield* TestClock.adjust("500 millis")
      const second = yield* Effect.fork(Effect.either(Effect.withClock(run(timeouts, Effect.never), other)))
      // its timer fiber starts from the scheduler
      for (let i = 0; i < 3; i++) yield* Effect.yieldNow()
      // the shared fiber's sleep and the other caller's own timer
      expect(timeouts.starts).toBe(1)
      expect(yield* sleeps).toHaveLength(2)
      yield* TestClock.adjust("500 millis")
      expect(yield* Fiber.join(first)).toEqual(Either.left(timedOut))
      expect(second.unsafePoll()).toBeNull()
      yield* TestClock.adjust("500 millis")
      expect(yield* Fiber.join(second)).toEqual(Either.left(timedOut))
    }))

  it.effect("a deadline that comes before its caller has begun to wait still ends the wait", () =>
    Effect.gen(function*() {
      const timeouts = new DisconnectedTimeouts(Duration.millis(1))
      const testClock = yield* Effect.clock
      // a clock that moves a millisecond at each reading: the sleeping fiber, started after the caller joined
      // the list and before it waits, finds its deadline passed already
      let nanos = 0n
      const hurried: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => Number(nanos / 1_000_000n),
        unsafeCurrentTimeNanos: () => (nanos += 1_000_000n),
        currentTimeMillis: Effect.sync(() => Number(nanos / 1_000_000n)),
        currentTimeNanos: Effect.sync(() => (nanos += 1_000_000n)),
        sleep: (duration) => testClock.sleep(duration)
      }
      const result = yield* Effect.either(Effect.withClock(run(timeouts, Effect.never), hurried))
      expect(result).toEqual(Either.left(timedOut))
    }))

  it.effect("shutdown stops the sleeping fiber when no caller waits, and not while one does", () =>
    Effect.gen(function*() {
      const timeouts = new DisconnectedTimeouts(Duration.seconds(1))
      const answer = yield* Deferred.make<number>()
      const caller = yield* Effect.fork(run(timeouts, Deferred.await(answer)))
      const waiting = yield* Effect.fork(Effect.either(run(timeouts, Effect.never)))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(answer, 1)
      expect(yield* Fiber.join(caller)).toBe(1)
      // one caller still waits: its deadline must hold
      yield* timeouts.shutdown
      expect(timeouts.sleeping).toBe(true)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(waiting)).toEqual(Either.left(timedOut))
      const next = yield* Deferred.make<number>()
      const last = yield* Effect.fork(run(timeouts, Deferred.await(next)))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(next, 2)
      expect(yield* Fiber.join(last)).toBe(2)
      expect(timeouts.sleeping).toBe(true)
      yield* timeouts.shutdown
      expect(timeouts.sleeping).toBe(false)
      // the next caller starts another, which times it out
      const after = yield* Effect.fork(Effect.either(run(timeouts, Effect.never)))
      yield* Effect.yieldNow()
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(after)).toEqual(Either.left(timedOut))
    }))
})
