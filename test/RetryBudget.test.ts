import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { RetryBudget } from "../src/index.js"

describe("RetryBudget", () => {
  it("follows gRFC A6: -1 per failure, +ratio per success, retry while tokens > max/2", () => {
    const budget = RetryBudget.unsafeMake({ maxTokens: 4, tokenRatio: 0.5 })
    expect(budget.unsafeRecordFailure()).toBe(true) // 3 > 2
    expect(budget.unsafeRecordFailure()).toBe(false) // 2 > 2 is false
    budget.unsafeRecordSuccess() // 2.5
    expect(budget.unsafeRecordFailure()).toBe(false) // 1.5
    for (let i = 0; i < 10; i++) budget.unsafeRecordFailure()
    expect(Effect.runSync(budget.tokens)).toBe(0) // floor 0
    for (let i = 0; i < 100; i++) budget.unsafeRecordSuccess()
    expect(Effect.runSync(budget.tokens)).toBe(4) // ceiling maxTokens
  })

  it.effect("is a service provided by a layer", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.RetryBudget
      expect(yield* budget.recordFailure).toBe(true)
      expect(yield* budget.tokens).toBe(9)
      yield* budget.recordSuccess
      expect(yield* budget.tokens).toBeCloseTo(9.1)
    }).pipe(Effect.provide(RetryBudget.layer({ maxTokens: 10, tokenRatio: 0.1 }))))

  it.prop(
    "with tokenRatio 0.1, allowed retries stay under 10% of successes plus maxTokens",
    [fc.array(fc.boolean(), { maxLength: 2_000 })],
    ([outcomes]) => {
      // each request: its first attempt succeeds or fails; a failure is retried while the budget allows
      const maxTokens = 10
      const budget = RetryBudget.unsafeMake({ maxTokens, tokenRatio: 0.1 })
      let successes = 0
      let retries = 0
      for (const ok of outcomes) {
        if (ok) {
          budget.unsafeRecordSuccess()
          successes++
        } else if (budget.unsafeRecordFailure()) {
          retries++ // and that retry fails too: the worst case
          budget.unsafeRecordFailure()
        }
      }
      expect(retries).toBeLessThanOrEqual(0.1 * successes + maxTokens)
    }
  )

  it("rejects maxTokens <= 0 and bad ratios", () => {
    expect(() => RetryBudget.layer({ maxTokens: 0, tokenRatio: 0.1 })).toThrow(/maxTokens/)
    expect(() => RetryBudget.unsafeMake({ maxTokens: -1, tokenRatio: 0.1 })).toThrow(/maxTokens/)
    expect(() => RetryBudget.unsafeMake({ maxTokens: NaN, tokenRatio: 0.1 })).toThrow(/maxTokens/)
    expect(() => RetryBudget.unsafeMake({ maxTokens: 10, tokenRatio: 0 })).toThrow(/tokenRatio/)
  })
})
