import { failureOption, fork, pollFiber, scoped, settle, takeAllTransitions, TestClock } from "#edition"
import { describe, expect } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Schedule } from "effect"
import { CircuitBreaker } from "effect-resilience"

// halfOpenTimeout: a half-open period whose trials have not all ended by its deadline opens the breaker again,
// and while every permit is taken a rejected caller is told the time left in the period, never zero.

const ok = Effect.succeed("ok")
const boom = Effect.fail("boom")

const call = <A, E>(breaker: CircuitBreaker.CircuitBreaker, self: Effect.Effect<A, E>) =>
  Effect.exit(breaker.protect(self))

/** The `retryAfter` of a call refused with `CircuitOpen`, in milliseconds. */
const refusedFor = (breaker: CircuitBreaker.CircuitBreaker) =>
  Effect.map(call(breaker, ok), (exit) => {
    if (Exit.isSuccess(exit)) throw new Error("expected CircuitOpen, the call ran")
    const e = failureOption(exit.cause)
    if (e._tag === "None" || !(e.value instanceof CircuitBreaker.CircuitOpen)) throw new Error("expected CircuitOpen")
    return Duration.toMillis(e.value.retryAfter)
  })

/** A trial that runs until `gate` is completed, then ends as `gate` says. */
const held = (breaker: CircuitBreaker.CircuitBreaker, gate: Deferred.Deferred<string, string>) =>
  fork(breaker.protect(Deferred.await(gate)))

describe("CircuitBreaker halfOpenTimeout", () => {
  scoped(
    "a hung trial: the breaker opens again after the timeout, for the schedule's next delay",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(1),
          openFor: Schedule.exponential("1 second") // default halfOpenTimeout: 1 s, then 2 s, ...
        })
        const transitions = yield* breaker.subscribe
        yield* call(breaker, boom)
        yield* TestClock.adjust("1 second")
        const gate = yield* Deferred.make<string, string>()
        const hung = yield* held(breaker, gate)
        yield* settle
        // every permit is taken: the time left in the half-open period, which its first trial started
        expect(yield* refusedFor(breaker)).toBe(1000)
        yield* TestClock.adjust("400 millis")
        expect(yield* refusedFor(breaker)).toBe(600)
        yield* TestClock.adjust("600 millis")
        // the timer reopened it at the deadline, for the second opening's delay
        expect(yield* breaker.state).toBe("open")
        expect(yield* refusedFor(breaker)).toBe(2000)
        expect(yield* takeAllTransitions(transitions)).toEqual([
          { from: "closed", to: "open", at: 0 },
          { from: "open", to: "half-open", at: 1000 },
          { from: "half-open", to: "open", at: 2000 }
        ])
        // its late success is the caller's result, and decides nothing
        yield* Deferred.succeed(gate, "late")
        expect(yield* Fiber.join(hung)).toBe("late")
        expect(yield* breaker.state).toBe("open")
        expect(yield* refusedFor(breaker)).toBe(2000)
      })
  )

  scoped(
    "the hung trial loses its permit: the next half-open period runs a trial, and its late failure changes nothing",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({ trip: CircuitBreaker.consecutive(1), openFor: "1 second" })
        yield* call(breaker, boom)
        yield* TestClock.adjust("1 second")
        const gate = yield* Deferred.make<string, string>()
        const hung = yield* held(breaker, gate)
        yield* settle
        yield* TestClock.adjust("1 second")
        expect(yield* breaker.state).toBe("open")
        yield* TestClock.adjust("1 second")
        // still hanging, but no longer holding the only permit
        expect(yield* breaker.state).toBe("half-open")
        expect(yield* call(breaker, ok)).toEqual(Exit.succeed("ok"))
        expect(yield* breaker.state).toBe("closed")
        yield* Deferred.fail(gate, "late failure")
        expect(yield* Fiber.await(hung)).toEqual(Exit.fail("late failure"))
        expect(yield* breaker.state).toBe("closed")
      })
  )

  scoped(
    "with two permits: one trial succeeded, one hangs: refused callers wait for the period's end, then it reopens",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(1),
          openFor: "30 seconds",
          halfOpenPermits: 2,
          halfOpenTimeout: "5 seconds"
        })
        yield* call(breaker, boom)
        yield* TestClock.adjust("30 seconds")
        const gate = yield* Deferred.make<string, string>()
        yield* held(breaker, gate)
        yield* settle
        yield* TestClock.adjust("1 second")
        expect(yield* call(breaker, ok)).toEqual(Exit.succeed("ok"))
        expect(yield* breaker.state).toBe("half-open")
        expect(yield* refusedFor(breaker)).toBe(4000)
        yield* TestClock.adjust("3999 millis")
        expect(yield* refusedFor(breaker)).toBe(1)
        yield* TestClock.adjust("1 millis")
        expect(yield* breaker.state).toBe("open")
        expect(yield* refusedFor(breaker)).toBe(30_000)
      })
  )

  scoped("a longer halfOpenTimeout lets a trial slower than openFor decide", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreaker.make({
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second",
        halfOpenTimeout: "10 seconds"
      })
      yield* call(breaker, boom)
      yield* TestClock.adjust("1 second")
      const slow = yield* fork(breaker.protect(Effect.as(Effect.sleep("5 seconds"), "slow")))
      yield* settle
      yield* TestClock.adjust("5 seconds")
      expect(yield* Fiber.join(slow)).toBe("slow")
      expect(yield* breaker.state).toBe("closed")
    }))

  scoped(
    "the default is openFor's delay, not the longer opening openForAtLeast asked for",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(1),
          openFor: "1 second",
          openForAtLeast: () => Duration.seconds(5)
        })
        yield* call(breaker, boom)
        expect(yield* refusedFor(breaker)).toBe(5000)
        yield* TestClock.adjust("5 seconds")
        yield* held(breaker, yield* Deferred.make<string, string>())
        yield* settle
        expect(yield* refusedFor(breaker)).toBe(1000)
      })
  )

  scoped(
    "a trial of an earlier period holds its permit until that period's deadline, and no longer",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(1),
          openFor: "10 seconds",
          halfOpenPermits: 2,
          halfOpenTimeout: "15 seconds"
        })
        yield* call(breaker, boom)
        yield* TestClock.adjust("10 seconds")
        // period 1 (t = 10 s, deadline 25 s): one trial hangs, the other fails and reopens it until 20 s
        yield* held(breaker, yield* Deferred.make<string, string>())
        yield* settle
        yield* call(breaker, boom)
        yield* TestClock.adjust("10 seconds")
        // period 2 (t = 20 s): one permit is still the hung trial's
        const other = yield* held(breaker, yield* Deferred.make<string, string>())
        yield* settle
        expect(yield* refusedFor(breaker)).toBe(5000)
        yield* TestClock.adjust("5 seconds")
        // its period's deadline came: its permit is free, though it still runs
        expect(yield* call(breaker, ok)).toEqual(Exit.succeed("ok"))
        expect(yield* breaker.state).toBe("half-open")
        expect(pollFiber(other)).toBeUndefined()
      })
  )

  scoped(
    "a sparse half-open period: a trial admitted with none running starts the clock again, and can close it",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(1),
          openFor: "10 seconds",
          halfOpenPermits: 2,
          halfOpenTimeout: "1 second"
        })
        yield* call(breaker, boom)
        yield* TestClock.adjust("10 seconds")
        expect(yield* call(breaker, ok)).toEqual(Exit.succeed("ok"))
        // the second caller comes long after the first trial's deadline: nothing was running, nothing hung
        yield* TestClock.adjust("5 seconds")
        expect(yield* breaker.state).toBe("half-open")
        const gate = yield* Deferred.make<string, string>()
        const second = yield* held(breaker, gate)
        yield* settle
        // its own clock: the full halfOpenTimeout, not what was left of the first trial's
        expect(yield* refusedFor(breaker)).toBe(1000)
        yield* TestClock.adjust("500 millis")
        yield* Deferred.succeed(gate, "ok")
        expect(yield* Fiber.join(second)).toBe("ok")
        expect(yield* breaker.state).toBe("closed")
      })
  )

  scoped(
    "a breaker restored half-open times out with the openFor delay of the openings it had",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(1),
          openFor: Schedule.exponential("1 second"),
          initialState: { state: "half-open", isolated: false, openUntil: null, openings: 3, window: null as never }
        })
        yield* held(breaker, yield* Deferred.make<string, string>())
        yield* settle
        // the third opening's delay: 4 s
        expect(yield* refusedFor(breaker)).toBe(4000)
        yield* TestClock.adjust("4 seconds")
        expect(yield* breaker.state).toBe("open")
        expect(yield* refusedFor(breaker)).toBe(8000)
      })
  )
})
