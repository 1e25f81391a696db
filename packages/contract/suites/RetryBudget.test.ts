import { fc, IllegalArgument, prop } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { RetryBudget } from "effect-resilience"

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

  it("counts in exact thousandths: no float drift at the max/2 threshold", () => {
    // in floating point, 2 - 1 + 5 * 0.1 - 1 is 1.5000000000000004 > 1.5, and a retry would slip through
    const budget = RetryBudget.unsafeMake({ maxTokens: 3, tokenRatio: 0.1 })
    expect(budget.unsafeRecordFailure()).toBe(true) // 2 > 1.5
    for (let i = 0; i < 5; i++) budget.unsafeRecordSuccess() // 2.5
    expect(budget.unsafeRecordFailure()).toBe(false) // 1.5 > 1.5 is false
    expect(Effect.runSync(budget.tokens)).toBe(1.5)
  })

  it("ignores the decimals beyond the third, as gRPC does: 0.0999 gives back 0.099", () => {
    const budget = RetryBudget.unsafeMake({ maxTokens: 2, tokenRatio: 0.0999 })
    budget.unsafeRecordFailure()
    budget.unsafeRecordSuccess()
    expect(Effect.runSync(budget.tokens)).toBe(1.099)
    // 0.0009 is under one thousandth once the rest is dropped: it would give back nothing
    expect(() => RetryBudget.unsafeMake({ maxTokens: 2, tokenRatio: 0.0009 })).toThrow(/tokenRatio must be >= 0.001/)
    expect(() => RetryBudget.unsafeMake({ maxTokens: 0.0009, tokenRatio: 0.1 })).toThrow(/maxTokens/)
  })

  prop(
    "the exact count matches rational arithmetic for any sequence",
    [fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 1000 }), fc.array(fc.boolean(), { maxLength: 300 })],
    ([maxMilli, ratioMilli, outcomes]) => {
      const budget = RetryBudget.unsafeMake({ maxTokens: maxMilli / 1000, tokenRatio: ratioMilli / 1000 })
      let expected = maxMilli // in thousandths, as integers
      for (const ok of outcomes) {
        if (ok) {
          expected = Math.min(maxMilli, expected + ratioMilli)
          budget.unsafeRecordSuccess()
        } else {
          expected = Math.max(0, expected - 1000)
          expect(budget.unsafeRecordFailure()).toBe(2 * expected > maxMilli)
        }
      }
      expect(Effect.runSync(budget.tokens)).toBe(expected / 1000)
    }
  )

  it.effect("is a service provided by a layer", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.RetryBudget
      expect(yield* budget.recordFailure).toBe(true)
      expect(yield* budget.tokens).toBe(9)
      yield* budget.recordSuccess
      expect(yield* budget.tokens).toBe(9.1)
    }).pipe(Effect.provide(RetryBudget.layer({ maxTokens: 10, tokenRatio: 0.1 }))))

  prop(
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
    expect(() => RetryBudget.unsafeMake({ maxTokens: 10, tokenRatio: 0.0001 })).toThrow(/tokenRatio/)
    expect(() => RetryBudget.unsafeMake({ maxTokens: 10, tokenRatio: Infinity })).toThrow(/tokenRatio/)
    // `make` too, when it is called, not when its effect runs (the one rule, docs/conventions.md)
    expect(() => RetryBudget.make({ maxTokens: 10, tokenRatio: 0 })).toThrow(IllegalArgument)
  })
})
