import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as budget from "../src/retryBudget.js"
import { prop } from "./support/prop.js"

/** Options that pass `check`: at least one thousandth, up to a large bucket. */
const options = fc.tuple(
  fc.integer({ min: 1, max: 1_000_000 }).map((t) => t / 1000),
  fc.integer({ min: 1, max: 100_000 }).map((t) => t / 1000)
)
/** A sequence of outcomes: `true` a success, `false` a failed attempt. */
const outcomes = fc.array(fc.boolean(), { maxLength: 400 })

const replay = (p: budget.Params, events: ReadonlyArray<boolean>): Array<number> => {
  let tokens = budget.initial(p)
  return events.map((ok) => tokens = ok ? budget.afterSuccess(p, tokens) : budget.afterFailure(tokens))
}

describe("core/retryBudget", () => {
  it("gRPC's example: 10 tokens, 0.1 back per success", () => {
    const p = budget.params(10, 0.1)
    expect(p).toEqual({ max: 10_000, ratio: 100 })
    let tokens = budget.initial(p)
    // four failures leave 6 tokens: more than half, retries still allowed
    for (let i = 0; i < 4; i++) tokens = budget.afterFailure(tokens)
    expect(budget.toTokens(tokens)).toBe(6)
    expect(budget.allowsRetry(p, tokens)).toBe(true)
    // the fifth leaves exactly half: not more than half, so no retry
    tokens = budget.afterFailure(tokens)
    expect(budget.allowsRetry(p, tokens)).toBe(false)
    // ten successes give back exactly one token (no float drift)
    for (let i = 0; i < 10; i++) tokens = budget.afterSuccess(p, tokens)
    expect(budget.toTokens(tokens)).toBe(6)
    expect(budget.allowsRetry(p, tokens)).toBe(true)
  })

  it("options are kept to three decimal places, the rest ignored (truncated, as gRPC does)", () => {
    // A6: "decimal places beyond 3 are ignored (eg. 0.5466 is treated as 0.546)"; grpc-java: (int)(ratio * 1000)
    expect(budget.toThousandths(0.5466)).toBe(546)
    expect(budget.toThousandths(0.0999)).toBe(99)
    expect(budget.params(2.0004, 0.0015)).toEqual({ max: 2_000, ratio: 1 })
    expect(budget.params(9.9999, 0.0019)).toEqual({ max: 9_999, ratio: 1 })
    // on the decimal the user wrote, not the binary double below it: 1.005 * 1000 is 1004.999…
    expect(budget.toThousandths(1.005)).toBe(1005)
    expect(budget.toThousandths(0.001)).toBe(1)
    expect(budget.toThousandths(4.35)).toBe(4350)
    expect(budget.toThousandths(0.1 + 0.2)).toBe(300)
    expect(budget.toThousandths(10)).toBe(10_000)
    expect(budget.toThousandths(1e-7)).toBe(0)
    expect(budget.toThousandths(1e21)).toBe(1e24)
  })

  prop("truncation keeps the first three decimals of the number as written", [
    fc.integer({ min: 0, max: 1_000_000_000 }),
    fc.integer({ min: 0, max: 999 })
  ], ([thousandths, extra]) => {
    // thousandths / 1000 written out, with up to three more digits after it
    const whole = Math.floor(thousandths / 1000)
    const decimals = String(thousandths % 1000).padStart(3, "0")
    const written = Number(`${whole}.${decimals}${String(extra).padStart(3, "0")}`)
    expect(budget.toThousandths(written)).toBe(thousandths)
    expect(budget.toThousandths(thousandths / 1000)).toBe(thousandths)
  })

  prop("never more than the value, less by under one thousandth", [
    fc.double({ min: 0.001, max: 1e9, noNaN: true })
  ], ([x]) => {
    const t = budget.toThousandths(x)
    expect(Number.isInteger(t)).toBe(true)
    expect(t / 1000).toBeLessThanOrEqual(x)
    expect(x - t / 1000).toBeLessThan(0.001 + 1e-9 * x)
  })

  it("check names the option that cannot work", () => {
    expect(budget.check(10, 0.1)).toBeUndefined()
    expect(budget.check(0, 0.1)).toMatch(/^maxTokens must be a finite number > 0/)
    expect(budget.check(NaN, 0.1)).toMatch(/^maxTokens/)
    expect(budget.check(0.0001, 0.1)).toMatch(/^maxTokens must be >= 0.001/)
    expect(budget.check(10, Infinity)).toMatch(/^tokenRatio must be a finite number > 0/)
    expect(budget.check(10, 0.0004)).toMatch(/^tokenRatio must be >= 0.001/)
  })

  describe("properties", () => {
    prop("tokens never go above max nor below 0", [options, outcomes], ([[max, ratio], events]) => {
      const p = budget.params(max, ratio)
      for (const tokens of replay(p, events)) {
        expect(tokens).toBeGreaterThanOrEqual(0)
        expect(tokens).toBeLessThanOrEqual(p.max)
        expect(Number.isInteger(tokens)).toBe(true)
      }
    })

    prop("a failure takes one token, a success gives back ratio, unless a bound clips it", [
      options,
      fc.integer({ min: 0, max: 1_000_000_000 })
    ], ([[max, ratio], raw]) => {
      const p = budget.params(max, ratio)
      const tokens = raw % (p.max + 1)
      expect(budget.afterFailure(tokens)).toBe(tokens >= budget.MILLI ? tokens - budget.MILLI : 0)
      expect(budget.afterSuccess(p, tokens)).toBe(tokens + p.ratio <= p.max ? tokens + p.ratio : p.max)
    })

    prop("retries are allowed exactly while more than half of max is left", [
      options,
      fc.integer({ min: 0, max: 1_000_000_000 })
    ], ([[max, ratio], raw]) => {
      const p = budget.params(max, ratio)
      const tokens = raw % (p.max + 1)
      expect(budget.allowsRetry(p, tokens)).toBe(tokens > p.max / 2)
    })

    prop(
      "a run of failures from full stops retries after at most ceil(max / 2) of them",
      [options],
      ([[max, ratio]]) => {
        const p = budget.params(max, ratio)
        const events = Array.from({ length: Math.ceil(max / 2) + 1 }, () => false)
        const tokens = replay(p, events)
        expect(budget.allowsRetry(p, tokens[tokens.length - 1]!)).toBe(false)
      }
    )
  })
})
