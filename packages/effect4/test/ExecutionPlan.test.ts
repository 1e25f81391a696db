import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Duration, Effect, ExecutionPlan, Exit, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import {
  Backoff,
  CircuitBreaker,
  Deadline,
  Failure,
  RateLimiter,
  RateLimiterStore,
  Retry,
  RetryBudget
} from "../src/index.js"

// Effect 4's ExecutionPlan runs one effect with each step's services in turn. Its `while` sees every error —
// the step's own, and, for a later step, the error that ended the step before — so `Failure.isRetryable`
// keeps a step going only on what may be retried and moves on at once on the rest (Fatal, CircuitOpen, a
// rate limiter's or a retry's give-up).

type PriceError = Failure.Retryable<string> | Failure.Fatal<string>

class Prices extends Context.Service<Prices, { readonly get: Effect.Effect<number, unknown> }>()("Prices") {}

const price = Effect.flatMap(Prices, (prices) => prices.get)

/** A provider answering the n-th call (from 0) with `answer(n)`, counting the calls that reached it. */
const provider = (answer: (n: number) => number | PriceError) => {
  let calls = 0
  const get = Effect.suspend(() => {
    const a = answer(calls++)
    return typeof a === "number" ? Effect.succeed(a) : Effect.fail(a)
  })
  return { get, calls: () => calls }
}

const busy = Failure.retryable("503")
const bad = Failure.fatal("400")

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(Effect.yieldNow, { times: 20 })

const now = Effect.clockWith((clock) => clock.currentTimeMillis)

/** Runs `self` in a fiber, moves the clock `millis` on, and returns its exit and how long after its start it ended. */
const runFor = <A, E>(self: Effect.Effect<A, E>, millis: number) =>
  Effect.gen(function*() {
    const start = yield* now
    let endedAt = -1
    const fiber = yield* Effect.forkChild(Effect.onExit(self, () => Effect.map(now, (t) => void (endedAt = t - start))))
    yield* settle
    yield* TestClock.adjust(Duration.millis(millis))
    const exit = yield* Fiber.await(fiber)
    return { exit, endedAt }
  })

/** The exit's value, or its typed error's `_tag`. */
const outcome = (exit: Exit.Exit<unknown, unknown>) => {
  if (Exit.isSuccess(exit)) return exit.value
  const error = Cause.findErrorOption(exit.cause)
  if (Option.isNone(error)) throw new Error(`expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  return (error.value as { readonly _tag: string })._tag
}

const serve = (get: Effect.Effect<number, unknown>) => Layer.succeed(Prices, { get })

describe("ExecutionPlan with Backoff and Failure", () => {
  it.effect("a Backoff schedule retries the primary while Retryable, then the fallback runs", () =>
    Effect.gen(function*() {
      const primary = provider(() => busy)
      const fallback = provider(() => 7)
      const plan = ExecutionPlan.make(
        {
          provide: serve(primary.get),
          attempts: 3,
          schedule: Backoff.fullJitter({ base: "100 millis", cap: "1 second" }),
          while: Failure.isRetryable
        },
        { provide: serve(fallback.get) }
      )
      const { exit } = yield* runFor(Effect.withExecutionPlan(price, plan), 10_000)
      expect(outcome(exit)).toBe(7)
      expect([primary.calls(), fallback.calls()]).toEqual([3, 1])
    }))

  it.effect("a Fatal error leaves the step at once; the next step's `while` decides whether it falls back", () =>
    Effect.gen(function*() {
      const retryOnly = { attempts: 3, schedule: Backoff.exponential({ base: "100 millis", cap: "1 second" }) }
      // a later step's `while` is asked first about the error that ended the step before it
      const primary = provider(() => bad)
      const fallback = provider(() => 7)
      const fallsBack = ExecutionPlan.make(
        { provide: serve(primary.get), ...retryOnly, while: Failure.isRetryable },
        { provide: serve(fallback.get) }
      )
      const first = yield* runFor(Effect.withExecutionPlan(price, fallsBack), 0)
      expect(outcome(first.exit)).toBe(7)
      expect([primary.calls(), fallback.calls()]).toEqual([1, 1])

      // the fallback refuses a Fatal: the plan fails with it, the fallback is never called
      const strict = ExecutionPlan.make(
        { provide: serve(primary.get), ...retryOnly, while: Failure.isRetryable },
        { provide: serve(fallback.get), while: (e: unknown) => !Failure.isFatal(e) }
      )
      const second = yield* runFor(Effect.withExecutionPlan(price, strict), 0)
      expect(outcome(second.exit)).toBe("Fatal")
      expect([primary.calls(), fallback.calls()]).toEqual([2, 1])
    }))

  it.effect("the wrong way: without `while`, a step's schedule retries a Fatal error too", () =>
    Effect.gen(function*() {
      const primary = provider(() => bad)
      const plan = ExecutionPlan.make({
        provide: serve(primary.get),
        attempts: 3,
        schedule: Backoff.exponential({ base: "100 millis", cap: "1 second" })
      })
      const { endedAt, exit } = yield* runFor(Effect.withExecutionPlan(price, plan), 10_000)
      expect(outcome(exit)).toBe("Fatal")
      expect(primary.calls()).toBe(3) // a 400 sent three times
      expect(endedAt).toBe(300) // after 100 + 200 ms of backoff
    }))
  it.effect("a later step's schedule is stepped first by the failure that ended the step before: it waits first", () =>
    Effect.gen(function*() {
      const fallback = provider((n) => n === 0 ? busy : 7)
      const plan = ExecutionPlan.make(
        { provide: serve(Effect.fail(bad)) },
        {
          provide: serve(fallback.get),
          attempts: 2,
          schedule: Backoff.exponential({ base: "100 millis", cap: "1 second" })
        }
      )
      // the Fatal of the primary is the schedule's first input: 100 ms before the first call, 200 before the second
      const { endedAt, exit } = yield* runFor(Effect.withExecutionPlan(price, plan), 10_000)
      expect(outcome(exit)).toBe(7)
      expect(endedAt).toBe(300)
      expect(fallback.calls()).toBe(2)
    }))
})

describe("ExecutionPlan with CircuitBreaker", () => {
  const breakerOptions = { trip: CircuitBreaker.consecutive(2), openFor: "30 seconds" } as const
  const retrying = { attempts: 3, schedule: Backoff.exponential({ base: "100 millis", cap: "1 second" }) }

  it.effect("once the breaker opens, CircuitOpen moves the plan to the fallback at once, the primary uncalled", () =>
    Effect.gen(function*() {
      const primary = provider(() => busy)
      const fallback = provider(() => 7)
      // one breaker, built once, shared by every run of the plan
      const breaker = yield* CircuitBreaker.make(breakerOptions)
      const plan = ExecutionPlan.make(
        { provide: serve(breaker.protect(primary.get)), ...retrying, while: Failure.isRetryable },
        { provide: serve(fallback.get) }
      )
      const program = Effect.withExecutionPlan(price, plan)
      // calls at 0 and 100 fail and open the breaker; the third attempt (at 300) is refused: CircuitOpen is not
      // Retryable, so the plan falls back then instead of backing off further
      const first = yield* runFor(program, 10_000)
      expect(outcome(first.exit)).toBe(7)
      expect(first.endedAt).toBe(300)
      expect(primary.calls()).toBe(2)
      expect(yield* breaker.state).toBe("open")
      // open: the fallback answers at once (no clock move), the primary is not called
      const second = yield* runFor(program, 0)
      expect(outcome(second.exit)).toBe(7)
      expect(second.endedAt).toBe(0)
      expect([primary.calls(), fallback.calls()]).toEqual([2, 2])
    }))

  it.effect("the wrong way: without `while`, the plan retries through the open breaker, delaying the fallback", () =>
    Effect.gen(function*() {
      const primary = provider(() => busy)
      const breaker = yield* CircuitBreaker.make(breakerOptions)
      yield* breaker.isolate
      const plan = ExecutionPlan.make(
        { provide: serve(breaker.protect(primary.get)), ...retrying },
        { provide: serve(Effect.succeed(7)) }
      )
      const { endedAt, exit } = yield* runFor(Effect.withExecutionPlan(price, plan), 10_000)
      expect(outcome(exit)).toBe(7)
      expect(primary.calls()).toBe(0)
      expect(endedAt).toBe(300) // two backoff delays spent on refusals
    }))

  it.effect("the wrong way: a breaker built in the step's layer is a new one at every run and never opens", () =>
    Effect.gen(function*() {
      const primary = provider(() => busy)
      const plan = ExecutionPlan.make(
        {
          provide: Layer.effect(
            Prices,
            Effect.map(CircuitBreaker.make(breakerOptions), (breaker) => ({ get: breaker.protect(primary.get) }))
          ),
          while: Failure.isRetryable
        },
        { provide: serve(Effect.succeed(7)) }
      )
      for (let run = 0; run < 5; run++) {
        const { exit } = yield* runFor(Effect.withExecutionPlan(price, plan), 0)
        expect(outcome(exit)).toBe(7)
      }
      expect(primary.calls()).toBe(5) // every run reached the failing primary
    }))
})

describe("ExecutionPlan with Deadline, RateLimiter and Retry", () => {
  it.effect("a limiter that would wait past the outer deadline gives up at once; the fallback gets the time", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 0.1 })
      const primary = provider(() => 5)
      const plan = ExecutionPlan.make(
        { provide: serve(Effect.andThen(limiter.acquire("partner"), primary.get)), while: Failure.isRetryable },
        { provide: serve(Effect.succeed(7)) }
      )
      const program = Effect.withExecutionPlan(price, plan).pipe(Deadline.within("1 second"))
      expect(outcome((yield* runFor(program, 0)).exit)).toBe(5) // the one token
      // the next token comes in 10 s, after the deadline: RateLimited ("deadline"), not Retryable
      const { endedAt, exit } = yield* runFor(program, 0)
      expect(outcome(exit)).toBe(7)
      expect(endedAt).toBe(0)
      expect(primary.calls()).toBe(1)
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))

  it.effect("Retry.retry in the step stops before the deadline and leaves the rest to the fallback", () =>
    Effect.gen(function*() {
      const primary = provider(() => busy)
      const fallback = provider(() => 7)
      const schedule = Backoff.exponential({ base: "400 millis", cap: "10 seconds" })
      const plan = ExecutionPlan.make(
        { provide: serve(Retry.retry(primary.get, { schedule, maxAttempts: 10 })), while: Failure.isRetryable },
        { provide: serve(fallback.get) }
      )
      const program = Effect.withExecutionPlan(price, plan).pipe(Deadline.within("1 second"))
      // calls at 0 and 400; the next would start at 1200, past the deadline: RetriesExhausted ("deadline")
      const { endedAt, exit } = yield* runFor(program, 10_000)
      expect(outcome(exit)).toBe(7)
      expect(endedAt).toBe(400)
      expect([primary.calls(), fallback.calls()]).toEqual([2, 1])
    }))

  it.effect("the wrong way: a step schedule sleeps through the outer deadline; the fallback never runs", () =>
    Effect.gen(function*() {
      const primary = provider(() => busy)
      const fallback = provider(() => 7)
      const plan = ExecutionPlan.make(
        {
          provide: serve(primary.get),
          attempts: 10,
          schedule: Backoff.exponential({ base: "400 millis", cap: "10 seconds" }),
          while: Failure.isRetryable
        },
        { provide: serve(fallback.get) }
      )
      const program = Effect.withExecutionPlan(price, plan).pipe(Deadline.within("1 second"))
      const { endedAt, exit } = yield* runFor(program, 10_000)
      expect(outcome(exit)).toBe("DeadlineExceeded")
      expect(endedAt).toBe(1000)
      expect(fallback.calls()).toBe(0)
    }))

  it.effect("a shared RetryBudget that refuses a retry moves the plan to the fallback at once", () =>
    Effect.gen(function*() {
      const primary = provider(() => busy)
      const fallback = provider(() => 7)
      // 4 tokens, a retry needs more than 2: the first failure leaves 3 (retry), the second 2 (no retry)
      const budget = RetryBudget.unsafeMake({ maxTokens: 4, tokenRatio: 0.1 })
      const schedule = Backoff.exponential({ base: "100 millis", cap: "1 second" })
      const plan = ExecutionPlan.make(
        { provide: serve(Retry.retry(primary.get, { schedule, maxAttempts: 5, budget })), while: Failure.isRetryable },
        { provide: serve(fallback.get) }
      )
      const program = Effect.withExecutionPlan(price, plan)
      const first = yield* runFor(program, 10_000)
      expect(outcome(first.exit)).toBe(7)
      expect(first.endedAt).toBe(100)
      expect(primary.calls()).toBe(2)
      // the budget is spent: one call, no retry, straight to the fallback
      const second = yield* runFor(program, 10_000)
      expect(outcome(second.exit)).toBe(7)
      expect(second.endedAt).toBe(0)
      expect([primary.calls(), fallback.calls()]).toEqual([3, 2])
    }))
})
