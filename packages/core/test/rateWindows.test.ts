import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as RateWindows from "../src/rateWindows.js"
import { prop } from "./support/prop.js"

const params = { limit: 3, windowMillis: 1000 }

describe("core/rateWindows", () => {
  it("fixed: at most `limit` per aligned window; retryAfter is the window's end", () => {
    let s = RateWindows.fresh
    for (let i = 0; i < 3; i++) s = RateWindows.fixedWindow(s, 1, params, 10_200).state
    const denied = RateWindows.fixedWindow(s, 1, params, 10_300)
    expect(denied.decision).toEqual({
      allowed: false,
      limit: 3,
      remaining: 0,
      retryAfterMillis: 700,
      resetAfterMillis: 700
    })
    expect(denied.state).toBe(s)
    expect(RateWindows.fixedWindow(s, 1, params, 11_000).decision.allowed).toBe(true)
    expect(RateWindows.fixedWindow(s, 4, params, 11_000).decision.retryAfterMillis).toBe(Infinity)
  })

  it("sliding: the previous window weighs what is left of it", () => {
    let s = RateWindows.fresh
    for (let i = 0; i < 3; i++) s = RateWindows.slidingWindow(s, 1, params, 10_900).state
    // at 11_500 the previous 3 weigh 1.5: one more fits (2.5), a second does not (3.5)
    const one = RateWindows.slidingWindow(s, 1, params, 11_500)
    expect(one.decision.allowed).toBe(true)
    expect(one.state).toEqual({ start: 11_000, current: 1, previous: 3 })
    const two = RateWindows.slidingWindow(one.state, 1, params, 11_500)
    expect(two.decision).toMatchObject({ allowed: false, retryAfterMillis: 167 })
  })

  const request = fc.record({ dt: fc.integer({ min: 0, max: 800 }), cost: fc.integer({ min: 1, max: 5 }) })
  const windowParams = fc.record({
    limit: fc.integer({ min: 1, max: 5 }),
    windowMillis: fc.oneof(fc.integer({ min: 1, max: 2000 }), fc.double({ min: 0.5, max: 2000, noNaN: true }))
  })
  const algorithms = fc.constantFrom(
    ["fixed", RateWindows.fixedWindow] as const,
    ["sliding", RateWindows.slidingWindow] as const
  )

  prop(
    "counts never negative nor over the limit; no aligned window admits more than `limit`",
    [algorithms, windowParams, fc.array(request, { maxLength: 100 })],
    ([[, algorithm], p, requests]) => {
      let s = RateWindows.fresh
      let now = 1_700_000_000_000
      const perWindow = new Map<number, number>()
      for (const r of requests) {
        now += r.dt
        const step = algorithm(s, r.cost, p, now)
        const d = step.decision
        expect(step.state.current).toBeGreaterThanOrEqual(0)
        expect(step.state.previous).toBeGreaterThanOrEqual(0)
        expect(step.state.current).toBeLessThanOrEqual(p.limit)
        expect(d.remaining).toBeGreaterThanOrEqual(0)
        expect(d.remaining).toBeLessThanOrEqual(p.limit)
        if (d.allowed) {
          const index = Math.round(step.state.start / p.windowMillis)
          perWindow.set(index, (perWindow.get(index) ?? 0) + r.cost)
          expect(perWindow.get(index)).toBeLessThanOrEqual(p.limit)
        }
        s = step.state
      }
    }
  )

  prop(
    "monotonic in time, and waiting retryAfter is always enough",
    [algorithms, windowParams, fc.array(request, { maxLength: 30 }), request, fc.integer({ min: 0, max: 5000 })],
    ([[name, algorithm], p, history, next, later]) => {
      let s = RateWindows.fresh
      let now = 1_700_000_000_000
      for (const r of history) {
        now += r.dt
        s = algorithm(s, r.cost, p, now).state
      }
      const d = algorithm(s, next.cost, p, now).decision
      if (d.allowed) {
        // a fixed window may start a new window later and still allow; a sliding one only forgets more
        expect(algorithm(s, next.cost, p, now + later).decision.allowed).toBe(true)
      } else if (d.retryAfterMillis !== Infinity) {
        expect(algorithm(s, next.cost, p, now + d.retryAfterMillis).decision.allowed, name).toBe(true)
      } else expect(next.cost).toBeGreaterThan(p.limit)
    }
  )
})
