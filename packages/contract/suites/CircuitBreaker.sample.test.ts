import { effectProp, failureOption, fc, fork, pollFiber, scoped, settle, TestClock } from "#edition"
import { describe, expect } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber } from "effect"
import { CircuitBreaker } from "effect-resilience"

// halfOpenFailureRate: a half-open period judged on all its trials instead of its first failure.

class Down {
  readonly _tag = "Down"
  /** openForAtLeast reads it: how long the dependency asked to be left alone, in seconds. */
  constructor(readonly asks = 0) {}
}
class NotFound {
  readonly _tag = "NotFound"
}

type Ending = "ok" | "down" | "down, leave me 30 s" | "ignored"

/** A trial held until its gate is completed with how it ends. */
const trial = (breaker: CircuitBreaker.CircuitBreaker) =>
  Effect.gen(function*() {
    const gate = yield* Deferred.make<Ending>()
    const fiber = yield* fork(
      breaker.protect(
        Effect.flatMap(
          Deferred.await(gate),
          (e): Effect.Effect<string, Down | NotFound> =>
            e === "ok"
              ? Effect.succeed("ok")
              : Effect.fail(e === "ignored" ? new NotFound() : new Down(e === "down" ? 0 : 30))
        )
      )
    )
    yield* settle
    return { end: (e: Ending) => Effect.andThen(Deferred.succeed(gate, e), Fiber.await(fiber)), fiber }
  })

const refusedFor = (breaker: CircuitBreaker.CircuitBreaker) =>
  Effect.map(Effect.exit(breaker.protect(Effect.void)), (exit) => {
    const e = Exit.isFailure(exit) ? failureOption(exit.cause) : undefined
    if (e?._tag !== "Some" || !(e.value instanceof CircuitBreaker.CircuitOpen)) throw new Error("expected CircuitOpen")
    return Duration.toMillis(e.value.retryAfter)
  })

const halfOpen = (options: Partial<CircuitBreaker.Options>) =>
  Effect.gen(function*() {
    const breaker = yield* CircuitBreaker.make({
      trip: CircuitBreaker.consecutive(1),
      openFor: "1 second",
      halfOpenPermits: 4,
      halfOpenFailureRate: 0.5,
      isIgnored: (e) => e instanceof NotFound,
      ...options
    })
    yield* Effect.exit(breaker.protect(Effect.fail(new Down())))
    yield* TestClock.adjust("1 second")
    return breaker
  })

describe("CircuitBreaker halfOpenFailureRate", () => {
  scoped(
    "a failed trial does not reopen it alone: all four end, then 1 of 4 failed closes it",
    () =>
      Effect.gen(function*() {
        const breaker = yield* halfOpen({})
        const trials = yield* Effect.forEach([1, 2, 3, 4], () => trial(breaker))
        yield* trials[0]!.end("down")
        yield* trials[1]!.end("ok")
        yield* trials[2]!.end("ok")
        expect(yield* breaker.state).toBe("half-open")
        yield* trials[3]!.end("ok")
        expect(yield* breaker.state).toBe("closed")
      })
  )

  scoped("2 of 4 failed is not below 0.5: it opens again, for the next delay", () =>
    Effect.gen(function*() {
      const breaker = yield* halfOpen({})
      const trials = yield* Effect.forEach([1, 2, 3, 4], () => trial(breaker))
      for (const [i, e] of (["down", "ok", "down"] as const).entries()) yield* trials[i]!.end(e)
      expect(yield* breaker.state).toBe("half-open")
      yield* trials[3]!.end("ok")
      expect(yield* breaker.state).toBe("open")
    }))

  scoped(
    "an ignored trial is not in the sample: its permit goes to another trial, whose outcome counts",
    () =>
      Effect.gen(function*() {
        const breaker = yield* halfOpen({})
        const trials = yield* Effect.forEach([1, 2, 3, 4], () => trial(breaker))
        expect(yield* refusedFor(breaker)).toBe(1000)
        yield* trials[0]!.end("ignored")
        const fifth = yield* trial(breaker)
        expect(pollFiber(fifth.fiber)).toBeUndefined() // admitted, running
        for (const t of [trials[1]!, trials[2]!, trials[3]!]) yield* t.end("ok")
        expect(yield* breaker.state).toBe("half-open")
        yield* fifth.end("down")
        expect(yield* breaker.state).toBe("closed") // 1 of 4
      })
  )

  scoped(
    "a sample not complete by halfOpenTimeout: the period opens again, whatever its trials said so far",
    () =>
      Effect.gen(function*() {
        const breaker = yield* halfOpen({ halfOpenTimeout: "3 seconds" })
        const trials = yield* Effect.forEach([1, 2, 3, 4], () => trial(breaker))
        for (const t of trials.slice(0, 3)) yield* t.end("ok")
        yield* TestClock.adjust("3 seconds")
        expect(yield* breaker.state).toBe("open")
        yield* trials[3]!.end("ok")
        expect(yield* breaker.state).toBe("open")
      })
  )

  scoped(
    "the opening after a failed sample lasts what its failed trials asked for (openForAtLeast)",
    () =>
      Effect.gen(function*() {
        const breaker = yield* halfOpen({
          halfOpenPermits: 3,
          openForAtLeast: (e) => e instanceof Down && e.asks > 0 ? Duration.seconds(e.asks) : undefined
        })
        const [a, b, c] = yield* Effect.forEach([1, 2, 3], () => trial(breaker))
        yield* a!.end("down")
        yield* b!.end("down, leave me 30 s")
        yield* c!.end("ok")
        // 2 of 3 failed; the longest any of them asked for, not the last trial's (a success)
        expect(yield* refusedFor(breaker)).toBe(30_000)
      })
  )

  const ending = fc.constantFrom<Array<Ending>>("ok", "down", "ignored")

  effectProp(
    "the decision is the rule over the sample, never more than halfOpenPermits trials run, ignored ones excluded",
    {
      permits: fc.integer({ min: 1, max: 5 }),
      rate: fc.constantFrom(0.2, 0.25, 0.5, 0.6, 1),
      // trials started and ended in any order: [start a trial] or [end running trial i with e]
      steps: fc.array(fc.oneof(fc.constant("start" as const), fc.tuple(fc.nat(), ending)), { maxLength: 40 })
    },
    ({ permits, rate, steps }) =>
      Effect.gen(function*() {
        const breaker = yield* halfOpen({ halfOpenPermits: permits, halfOpenFailureRate: rate })
        const running: Array<{ readonly end: (e: Ending) => Effect.Effect<unknown> }> = []
        let ended = 0
        let failed = 0
        for (const step of steps) {
          if ((yield* breaker.state) !== "half-open") break
          if (step === "start") {
            const t = yield* trial(breaker)
            if (pollFiber(t.fiber) === undefined) running.push(t)
            // refused only when every permit is taken, by a trial running or one that ended in the sample
            else expect(running.length + ended).toBe(permits)
          } else if (running.length > 0) {
            const [i, e] = step
            yield* running.splice(i % running.length, 1)[0]!.end(e)
            if (e !== "ignored") ended++
            if (e === "down") failed++
          }
          expect(running.length).toBeLessThanOrEqual(permits)
          const state = yield* breaker.state
          if (ended < permits) expect(state).toBe("half-open")
          else expect(state).toBe(failed / permits < rate ? "closed" : "open")
        }
      }).pipe(Effect.scoped),
    { fastCheck: { numRuns: 100 } }
  )
})
