import { effectProp, failureOption, fc, fork, scoped, settle, TestClock } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber } from "effect"
import { CircuitBreaker } from "effect-resilience"

// isIgnored (a typed failure that counts as neither success nor failure) and CircuitOpen.lastFailure (the
// failure that opened the breaker).

class NotFound {
  readonly _tag = "NotFound"
}
class Down {
  readonly _tag = "Down"
  constructor(readonly n = 0) {}
}

const ok = Effect.succeed("ok")
const down = (n = 0) => Effect.fail(new Down(n))
const notFound = Effect.fail(new NotFound())
const isNotFound = (e: unknown) => e instanceof NotFound

const call = <A, E>(breaker: CircuitBreaker.CircuitBreaker, self: Effect.Effect<A, E>) =>
  Effect.exit(breaker.protect(self))

/** The `CircuitOpen` a refused call failed with. */
const refusal = (breaker: CircuitBreaker.CircuitBreaker) =>
  Effect.map(call(breaker, ok), (exit) => {
    const e = Exit.isFailure(exit) ? failureOption(exit.cause) : undefined
    if (e?._tag !== "Some" || !(e.value instanceof CircuitBreaker.CircuitOpen)) throw new Error("expected CircuitOpen")
    return e.value
  })

describe("CircuitBreaker isIgnored", () => {
  scoped(
    "an ignored failure is neither: not a failure, nor a success that would break a run of failures",
    () =>
      Effect.gen(function*() {
        const ignoring = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(2),
          openFor: "1 second",
          isIgnored: isNotFound
        })
        yield* call(ignoring, down())
        yield* call(ignoring, notFound)
        expect(yield* ignoring.state).toBe("closed") // not a failure
        yield* call(ignoring, down())
        expect(yield* ignoring.state).toBe("open") // nor a success
        // the same failure as a success (isFailure false) resets the run
        const lenient = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(2),
          openFor: "1 second",
          isFailure: (e) => !isNotFound(e)
        })
        yield* call(lenient, down())
        yield* call(lenient, notFound)
        yield* call(lenient, down())
        expect(yield* lenient.state).toBe("closed")
      })
  )

  scoped(
    "ignored calls are not in a failure-rate window: they bring it no nearer to minimumCalls",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 4, window: { calls: 10 } }),
          openFor: "1 second",
          isIgnored: isNotFound
        })
        for (let i = 0; i < 20; i++) yield* call(breaker, notFound)
        yield* call(breaker, down())
        yield* call(breaker, down())
        yield* call(breaker, ok)
        expect(yield* breaker.state).toBe("closed")
        yield* call(breaker, down())
        expect(yield* breaker.state).toBe("open")
      })
  )

  scoped("isIgnored is asked before isFailure; a defect is never ignored", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreaker.make({
        trip: CircuitBreaker.consecutive(1),
        openFor: "1 second",
        isIgnored: () => true,
        isFailure: () => true
      })
      yield* call(breaker, down())
      expect(yield* breaker.state).toBe("closed")
      yield* call(breaker, Effect.die("bug"))
      expect(yield* breaker.state).toBe("open")
    }))

  scoped(
    "an ignored trial gives its permit back and decides nothing: the next trial decides",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({
          trip: CircuitBreaker.consecutive(1),
          openFor: "1 second",
          isIgnored: isNotFound
        })
        yield* call(breaker, down())
        yield* TestClock.adjust("1 second")
        expect(yield* call(breaker, notFound)).toEqual(Exit.fail(new NotFound()))
        expect(yield* breaker.state).toBe("half-open")
        expect(yield* call(breaker, ok)).toEqual(Exit.succeed("ok"))
        expect(yield* breaker.state).toBe("closed")
      })
  )

  effectProp(
    "an ignored outcome never changes what the breaker does: the states are those of the history without it",
    {
      trip: fc.constantFrom(
        CircuitBreaker.consecutive(3),
        CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 4, window: { calls: 6 } })
      ),
      outcomes: fc.array(fc.constantFrom("ok", "down", "ignored", "tick"), { maxLength: 60 })
    },
    ({ outcomes, trip }) =>
      Effect.gen(function*() {
        const options = { trip, openFor: "1 second", isIgnored: isNotFound } as const
        const withIgnored = yield* CircuitBreaker.make(options)
        const without = yield* CircuitBreaker.make(options)
        for (const o of outcomes) {
          if (o === "tick") yield* TestClock.adjust("500 millis")
          else if (o === "ignored") yield* call(withIgnored, notFound)
          else {
            const self = o === "ok" ? ok : down()
            yield* call(withIgnored, self)
            yield* call(without, self)
          }
          expect(yield* withIgnored.state).toBe(yield* without.state)
        }
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 100 } }
  )
})

describe("CircuitOpen.lastFailure", () => {
  scoped(
    "the typed failure that opened it, told to every refused caller, in half-open too; a failed trial's next",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({ trip: CircuitBreaker.consecutive(2), openFor: "1 second" })
        yield* call(breaker, down(1))
        yield* call(breaker, down(2))
        expect((yield* refusal(breaker)).lastFailure).toEqual(new Down(2))
        yield* TestClock.adjust("1 second")
        const gate = yield* Deferred.make<void>()
        const trial = yield* fork(breaker.protect(Effect.andThen(Deferred.await(gate), down(3))))
        yield* settle
        // half-open, the permit taken: still the failure that opened it
        expect((yield* refusal(breaker)).lastFailure).toEqual(new Down(2))
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.await(trial)
        expect((yield* refusal(breaker)).lastFailure).toEqual(new Down(3))
      })
  )

  scoped("a defect that opened it is the defect", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreaker.make({ trip: CircuitBreaker.consecutive(1), openFor: "1 second" })
      const bug = new Error("bug")
      yield* call(breaker, Effect.die(bug))
      expect((yield* refusal(breaker)).lastFailure).toBe(bug)
    }))

  scoped("a failure rate reached by a success: the last failure in the window opened it", () =>
    Effect.gen(function*() {
      const breaker = yield* CircuitBreaker.make({
        trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 4, window: { calls: 10 } }),
        openFor: "1 second"
      })
      for (let i = 1; i <= 3; i++) yield* call(breaker, down(i))
      yield* call(breaker, ok)
      expect((yield* refusal(breaker)).lastFailure).toEqual(new Down(3))
    }))

  scoped(
    "absent when no failure opened it: isolated, a half-open period that timed out; gone once closed",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({ trip: CircuitBreaker.consecutive(1), openFor: "1 second" })
        yield* breaker.isolate
        const isolated = yield* refusal(breaker)
        expect("lastFailure" in isolated).toBe(false)
        expect(Duration.toMillis(isolated.retryAfter)).toBe(Infinity)
        yield* breaker.reset
        // opened by a failure, then isolated: the isolation is the reason now
        yield* call(breaker, down(1))
        yield* breaker.isolate
        expect("lastFailure" in (yield* refusal(breaker))).toBe(false)
        yield* breaker.reset
        // a trial that hangs past halfOpenTimeout: its period's deadline opened it, not a failure
        yield* call(breaker, down(2))
        yield* TestClock.adjust("1 second")
        yield* fork(breaker.protect(Effect.never))
        yield* settle
        yield* TestClock.adjust("1 second")
        expect(yield* breaker.state).toBe("open")
        expect("lastFailure" in (yield* refusal(breaker))).toBe(false)
        // and a closed breaker refuses nothing: the next opening tells its own failure
        yield* breaker.reset
        yield* call(breaker, down(4))
        expect((yield* refusal(breaker)).lastFailure).toEqual(new Down(4))
      })
  )
})

describe("validation", () => {
  it("isIgnored must be a function; halfOpenFailureRate a number in (0, 1]", () => {
    const base = { trip: CircuitBreaker.consecutive(1), openFor: "1 second" } as const
    expect(() => CircuitBreaker.make({ ...base, isIgnored: "NotFound" as never })).toThrow(/isIgnored/)
    for (const halfOpenFailureRate of [0, -0.5, 1.5, NaN, "half" as never]) {
      expect(() => CircuitBreaker.make({ ...base, halfOpenFailureRate })).toThrow(/halfOpenFailureRate/)
    }
    expect(() => CircuitBreaker.make({ ...base, halfOpenFailureRate: 1 })).not.toThrow()
  })
})

// Effect 4 resumes a fiber's wait on the stack of the fiber that resumes it: a deep nest must not overflow it
describe("CircuitBreaker nesting", () => {
  scoped(
    "five thousand nested protect calls of a breaker and a keyed registry resume without overflowing the stack",
    () =>
      Effect.gen(function*() {
        const breaker = yield* CircuitBreaker.make({ trip: CircuitBreaker.consecutive(1), openFor: "1 second" })
        const keyed = yield* CircuitBreaker.keyed<string>({ trip: CircuitBreaker.consecutive(1), openFor: "1 second" })
        const gate = yield* Deferred.make<void>()
        const nest = (n: number): Effect.Effect<number, unknown> =>
          n === 0
            ? Effect.as(Deferred.await(gate), 0)
            : Effect.map(breaker.protect(keyed.protect(nest(n - 1), `k${n % 3}`)), (d) => d + 1)
        const fiber = yield* fork(nest(5_000))
        yield* settle
        yield* Deferred.succeed(gate, undefined)
        expect(yield* Fiber.join(fiber)).toBe(5_000)
        expect(yield* breaker.state).toBe("closed")
      })
  )
})
