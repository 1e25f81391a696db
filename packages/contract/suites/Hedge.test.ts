import { counterValue, fork, pollUnsafe, scoped, TestClock, yieldNow } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit, Fiber } from "effect"
import { Hedge, RetryBudget } from "effect-resilience"

const hedgesFired = counterValue(Hedge.hedgesTotal)

/**
 * A call whose n-th copy (from 1) runs `behaviour(n)`. Records when each copy started and which
 * copies were interrupted (after an asynchronous finalizer, so "finalizers ran" is observable).
 */
const scripted = <A, E, R = never>(behaviour: (attempt: number) => Effect.Effect<A, E, R>) => {
  const starts: Array<number> = []
  const interrupted: Array<number> = []
  const call = Effect.suspend(() => {
    const attempt = starts.length + 1
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      starts.push(now)
      return Effect.onInterrupt(
        behaviour(attempt),
        () => Effect.andThen(yieldNow, Effect.sync(() => interrupted.push(attempt)))
      )
    })
  })
  return { call, starts, interrupted }
}

describe("Hedge", () => {
  it.effect("a copy that succeeds before the delay starts no hedge", () =>
    Effect.gen(function*() {
      const before = yield* hedgesFired
      const s = scripted(() => Effect.as(Effect.sleep("40 millis"), "fast"))
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "50 millis", maxAttempts: 3 })))
      yield* TestClock.adjust("40 millis")
      expect(yield* Fiber.join(fiber)).toBe("fast")
      yield* TestClock.adjust("1 second")
      expect(s.starts).toEqual([0])
      expect(yield* hedgesFired).toBe(before)
    }))

  it.effect("starts another copy every delay while none has finished, up to maxAttempts", () =>
    Effect.gen(function*() {
      const before = yield* hedgesFired
      const s = scripted(() => Effect.never)
      const fiber = yield* fork(Hedge.hedge(s.call, { delay: "100 millis", maxAttempts: 3 }))
      yield* TestClock.adjust("99 millis")
      expect(s.starts).toEqual([0])
      yield* TestClock.adjust("1 milli")
      expect(s.starts).toEqual([0, 100])
      yield* TestClock.adjust("100 millis")
      expect(s.starts).toEqual([0, 100, 200])
      yield* TestClock.adjust("10 seconds")
      expect(s.starts).toEqual([0, 100, 200])
      expect(yield* hedgesFired).toBe(before + 2)
      expect(pollUnsafe(fiber)).toBeUndefined()
      yield* Fiber.interrupt(fiber)
      expect(s.interrupted.sort()).toEqual([1, 2, 3])
    }))

  it.effect("the first success wins; the others are interrupted and finalized before it returns", () =>
    Effect.gen(function*() {
      // copy 1 takes 500 ms, copy 2 (started at 100) 50 ms, copy 3 (started at 200) would take 10 ms
      const s = scripted((n) => Effect.as(Effect.sleep(n === 1 ? 500 : n === 2 ? 50 : 10), `copy ${n}`))
      const fiber = yield* fork(
        s.call.pipe(
          Hedge.hedge({ delay: "100 millis", maxAttempts: 3 }),
          Effect.map((winner) => ({ winner, interruptedWhenReturned: [...s.interrupted] }))
        )
      )
      yield* TestClock.adjust("150 millis")
      const result = yield* Fiber.join(fiber)
      expect(result).toEqual({ winner: "copy 2", interruptedWhenReturned: [1] })
      expect(s.starts).toEqual([0, 100])
      expect(yield* Clock.currentTimeMillis).toBe(150)
    }))

  it.effect("when every copy fails, fails with the last failure (in time)", () =>
    Effect.gen(function*() {
      // copy 1 fails at 300; copy 2 (at 100) fails at 150; copy 3 starts at once then and fails at 200
      const s = scripted((n) => Effect.andThen(Effect.sleep(n === 1 ? 300 : 50), Effect.fail(`copy ${n}`)))
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 })))
      yield* TestClock.adjust("299 millis")
      expect(pollUnsafe(fiber)).toBeUndefined()
      yield* TestClock.adjust("1 milli")
      expect(yield* Fiber.await(fiber)).toEqual(Exit.fail("copy 1"))
      expect(s.starts).toEqual([0, 100, 150])
      expect(s.interrupted).toEqual([])
    }))

  it.effect("a copy that fails before the delay starts the next one at once", () =>
    Effect.gen(function*() {
      const s = scripted((n) => n === 1 ? Effect.andThen(Effect.sleep(10), Effect.fail("boom")) : Effect.succeed(n))
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 })))
      yield* TestClock.adjust("10 millis")
      expect(yield* Fiber.join(fiber)).toBe(2)
      expect(s.starts).toEqual([0, 10])
    }))

  it.effect("the delay to the next hedge counts from the copy started after a failure", () =>
    Effect.gen(function*() {
      const s = scripted((n) => n === 1 ? Effect.andThen(Effect.sleep(30), Effect.fail("boom")) : Effect.never)
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 })))
      yield* TestClock.adjust("129 millis")
      expect(s.starts).toEqual([0, 30])
      yield* TestClock.adjust("1 milli")
      expect(s.starts).toEqual([0, 30, 130])
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("defects count as failures and the last one is returned", () =>
    Effect.gen(function*() {
      const s = scripted((n) => n === 1 ? Effect.die("first") : Effect.die("second"))
      const exit = yield* Effect.exit(s.call.pipe(Hedge.hedge({ delay: "1 second", maxAttempts: 2 })))
      expect(exit).toEqual(Exit.die("second"))
      expect(s.starts).toEqual([0, 0])
    }))

  it.effect("maxAttempts 1 is no hedging at all", () =>
    Effect.gen(function*() {
      const s = scripted(() => Effect.as(Effect.sleep("1 second"), "slow"))
      expect(Hedge.hedge(s.call, { delay: 0, maxAttempts: 1 })).toBe(s.call)
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "10 millis", maxAttempts: 1 })))
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(fiber)).toBe("slow")
      expect(s.starts).toEqual([0])
    }))

  it.effect("delay 0 starts every copy at once", () =>
    Effect.gen(function*() {
      const s = scripted((n) => Effect.as(Effect.sleep(n === 3 ? 5 : 50), n))
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: 0, maxAttempts: 3 })))
      yield* TestClock.adjust("5 millis")
      expect(yield* Fiber.join(fiber)).toBe(3)
      expect(s.starts).toEqual([0, 0, 0])
      expect(s.interrupted.sort()).toEqual([1, 2])
    }))

  it.effect("interrupting the hedge interrupts every copy", () =>
    Effect.gen(function*() {
      const s = scripted(() => Effect.never)
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "10 millis", maxAttempts: 2 })))
      yield* TestClock.adjust("10 millis")
      yield* Fiber.interrupt(fiber)
      expect(s.interrupted.sort()).toEqual([1, 2])
      yield* TestClock.adjust("1 second")
      expect(s.starts).toEqual([0, 10])
    }))

  it.effect("annotates the current span with the copies started and the winner", () =>
    Effect.gen(function*() {
      const s = scripted((n) => n === 1 ? Effect.never : Effect.succeed(n))
      const fiber = yield* fork(
        s.call.pipe(
          Hedge.hedge({ delay: "10 millis", maxAttempts: 3 }),
          Effect.andThen(Effect.currentSpan),
          Effect.withSpan("call")
        )
      )
      yield* TestClock.adjust("10 millis")
      const span = yield* Fiber.join(fiber)
      expect(span.attributes.get("hedge.copies")).toBe(2)
      expect(span.attributes.get("hedge.winner")).toBe(2)
    }))

  scoped("a copy's scoped resources belong to the caller's scope, not to the hedge", () =>
    Effect.gen(function*() {
      const released: Array<number> = []
      const s = scripted((n) =>
        Effect.as(Effect.addFinalizer(() => Effect.sync(() => released.push(n))), n).pipe(
          Effect.tap(Effect.sleep(n === 1 ? 100 : 10))
        )
      )
      const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "10 millis", maxAttempts: 2 })))
      yield* TestClock.adjust("20 millis")
      expect(yield* Fiber.join(fiber)).toBe(2)
      expect(released).toEqual([])
    }))

  // live clock: nothing waits for time; the hedges' delays are an hour and never run out
  it.live(
    "nests thousands deep through recursion (a hedged page fetch) without growing the stack",
    () =>
      Effect.gen(function*() {
        // the copy that wins resumes its caller on its own stack in Effect 4: each level would finish inside the
        // one below it (Effect 4's internal/resume.ts unwinds past a depth; without it, 2,000 levels overflowed)
        const page = (left: number): Effect.Effect<number> =>
          left === 0 ? Effect.succeed(0) : Effect.andThen(yieldNow, Effect.suspend(() => page(left - 1))).pipe(
            Hedge.hedge({ delay: "1 hour", maxAttempts: 2 }),
            Effect.map((x) => x + 1)
          )
        expect(yield* page(2_000)).toBe(2_000)
      }),
    60_000
  )

  describe("with a retry budget (gRPC A6: hedges and retries share it)", () => {
    it.effect("each copy after the first costs a token, and none is sent once the budget refuses", () =>
      Effect.gen(function*() {
        // 4 tokens: a copy may go while more than 2 are left after paying for it
        const budget = RetryBudget.unsafeMake({ maxTokens: 4, tokenRatio: 0.5 })
        const s = scripted(() => Effect.as(Effect.sleep("1 second"), "slow"))
        const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "10 millis", maxAttempts: 5, budget })))
        yield* TestClock.adjust("100 millis")
        // copy 2 paid (4 → 3); copy 3 was refused (3 → 2, not above half): two copies in all
        expect(s.starts).toEqual([0, 10])
        expect(yield* budget.tokens).toBe(2)
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.join(fiber)).toBe("slow")
        // the win gives back a success
        expect(yield* budget.tokens).toBe(2.5)
      }))

    it.effect("the budget in the context is used when none is given", () =>
      Effect.gen(function*() {
        const s = scripted(() => Effect.as(Effect.sleep("100 millis"), "ok"))
        const fiber = yield* fork(
          s.call.pipe(
            Hedge.hedge({ delay: "10 millis", maxAttempts: 3 }),
            Effect.provideService(RetryBudget.RetryBudget, RetryBudget.unsafeMake({ maxTokens: 1, tokenRatio: 1 }))
          )
        )
        yield* TestClock.adjust("1 second")
        expect(yield* Fiber.join(fiber)).toBe("ok")
        expect(s.starts).toEqual([0])
      }))

    it.effect("when the refused hedge leaves only failed copies, the last failure is the result (no hang)", () =>
      Effect.gen(function*() {
        const budget = RetryBudget.unsafeMake({ maxTokens: 1, tokenRatio: 1 })
        const s = scripted((n) => Effect.andThen(Effect.sleep("5 millis"), Effect.fail(`failed ${n}`)))
        const fiber = yield* fork(s.call.pipe(Hedge.hedge({ delay: "50 millis", maxAttempts: 3, budget })))
        yield* TestClock.adjust("5 millis")
        const exit = yield* Fiber.await(fiber)
        expect(exit).toEqual(Exit.fail("failed 1"))
        expect(s.starts).toEqual([0])

        const late = scripted((n) => Effect.andThen(Effect.sleep("100 millis"), Effect.fail(`failed ${n}`)))
        const second = yield* fork(
          late.call.pipe(Hedge.hedge({ delay: "10 millis", maxAttempts: 3, budget }))
        )
        yield* TestClock.adjust("100 millis")
        expect(yield* Fiber.await(second)).toEqual(Exit.fail("failed 1"))
        expect(late.starts).toHaveLength(1)
      }))
  })

  it("rejects options that could never work", () => {
    expect(() => Hedge.hedge({ delay: "1 second", maxAttempts: 0 })).toThrow(/maxAttempts/)
    expect(() => Hedge.hedge({ delay: "1 second", maxAttempts: 2.5 })).toThrow(/maxAttempts/)
    expect(() => Hedge.hedge({ delay: -1, maxAttempts: 2 })).toThrow(/delay/)
    expect(() => Hedge.hedge({ delay: "nope" as any, maxAttempts: 2 })).toThrow(/delay/)
    expect(() => Hedge.hedge(Effect.void, { delay: NaN, maxAttempts: 2 })).toThrow(/delay/)
  })
})
