import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as backoff from "../src/backoff.js"
import { prop } from "./support/prop.js"

/** A duration in milliseconds, to the microsecond (durations, not subnormal floats whose halves are inexact). */
const millis = fc.integer({ min: 0, max: 10_000_000_000 }).map((us) => us / 1000)
/** Valid bounds: `0 <= base <= cap`, finite, including the zero and equal edges. */
const bounds = fc.tuple(millis, millis)
  .map(([a, b]): backoff.Bounds => ({ base: Math.min(a, b), cap: Math.max(a, b) }))
/** One uniform draw in [0, 1), as `Random.next` gives. */
const draw = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })
const retry = fc.integer({ min: 0, max: 2_000 })

/** Runs a formula from the initial state, one draw per step; the delays it chose. */
const run = (formula: backoff.Formula, b: backoff.Bounds, draws: ReadonlyArray<number>): Array<number> => {
  let state = backoff.initial(b)
  return draws.map((r) => {
    const [delay, next] = backoff.step(formula, b, state, r)
    state = next
    return delay
  })
}

describe("core/backoff", () => {
  it("the ceiling doubles from base up to cap, and zero stays zero", () => {
    const b = { base: 100, cap: 1_000 }
    expect([0, 1, 2, 3, 4, 5].map((n) => backoff.exponential(b, n))).toEqual([100, 200, 400, 800, 1000, 1000])
    expect(backoff.ceiling(b, 5_000)).toBe(1_000) // 2^5000 is Infinity: the cap absorbs it
    expect(backoff.ceiling({ base: 0, cap: 10 }, 5_000)).toBe(0) // not 0 * Infinity = NaN
  })

  it("the formulas at the edges of the draw", () => {
    const b = { base: 100, cap: 10_000 }
    expect(backoff.fullJitter(b, 2, 0)).toBe(0)
    expect(backoff.fullJitter(b, 2, 0.5)).toBe(200)
    expect(backoff.equalJitter(b, 2, 0)).toBe(200)
    expect(backoff.equalJitter(b, 2, 0.5)).toBe(300)
    expect(backoff.decorrelatedJitter(b, 100, 0)).toBe(100)
    expect(backoff.decorrelatedJitter(b, 1_000, 0.5)).toBe(100 + 0.5 * 2_900)
    expect(backoff.decorrelatedJitter(b, 9_000, 0.9)).toBe(10_000)
  })

  it("a step counts the retry and remembers the delay", () => {
    const b = { base: 10, cap: 1_000 }
    expect(backoff.initial(b)).toEqual({ n: 0, previous: 10 })
    expect(run(backoff.formulas.exponential, b, [0.3, 0.3, 0.3])).toEqual([10, 20, 40])
    expect(run(backoff.formulas.decorrelatedJitter, b, [1 / 2, 1 / 2])).toEqual([20, 35])
    expect(backoff.step(backoff.formulas.fullJitter, b, { n: 3, previous: 7 }, 0.25)).toEqual([20, {
      n: 4,
      previous: 20
    }])
  })

  it("bounds: finite, non-negative, cap not below base", () => {
    expect(backoff.checkBounds(0, 0)).toBeUndefined()
    expect(backoff.checkBounds(5, 5)).toBeUndefined()
    expect(backoff.checkBounds(100, 10)).toMatch(/cap \(10 ms\) must not be below base \(100 ms\)/)
    expect(backoff.checkBounds(-1, 10)).toMatch(/base/)
    expect(backoff.checkBounds(1, Infinity)).toMatch(/cap/)
    expect(backoff.checkBounds(NaN, 1)).toMatch(/base/)
  })

  describe("properties", () => {
    prop("the ceiling is in [base, cap] and never falls as n grows", [bounds, retry], ([b, n]) => {
      const c = backoff.ceiling(b, n)
      expect(c).toBeGreaterThanOrEqual(b.base)
      expect(c).toBeLessThanOrEqual(b.cap)
      expect(backoff.ceiling(b, n + 1)).toBeGreaterThanOrEqual(c)
    })

    prop("full jitter is in [0, c(n)]", [bounds, retry, draw], ([b, n, r]) => {
      const d = backoff.fullJitter(b, n, r)
      expect(d).toBeGreaterThanOrEqual(0)
      expect(d).toBeLessThanOrEqual(backoff.ceiling(b, n))
    })

    prop("equal jitter is in [c(n)/2, c(n)]", [bounds, retry, draw], ([b, n, r]) => {
      const d = backoff.equalJitter(b, n, r)
      const c = backoff.ceiling(b, n)
      expect(d).toBeGreaterThanOrEqual(c / 2)
      expect(d).toBeLessThanOrEqual(c)
    })

    prop(
      "decorrelated jitter stays in [base, cap] over any run of draws",
      [bounds, fc.array(draw, { minLength: 1, maxLength: 60 })],
      ([b, draws]) => {
        for (const d of run(backoff.formulas.decorrelatedJitter, b, draws)) {
          expect(d).toBeGreaterThanOrEqual(b.base)
          expect(d).toBeLessThanOrEqual(b.cap)
        }
      }
    )

    prop(
      "decorrelated jitter never exceeds three times the delay before it",
      [bounds, fc.array(draw, { minLength: 2, maxLength: 60 })],
      ([b, draws]) => {
        const delays = run(backoff.formulas.decorrelatedJitter, b, draws)
        delays.forEach((d, i) => expect(d).toBeLessThanOrEqual(3 * (i === 0 ? b.base : delays[i - 1]!) + 1e-6))
      }
    )

    prop("every formula is a pure function of its arguments", [bounds, retry, draw], ([b, n, r]) => {
      for (const formula of Object.values(backoff.formulas)) {
        const state = { n, previous: backoff.ceiling(b, n) }
        expect(formula(b, state, r)).toBe(formula(b, state, r))
      }
    })
  })
})
