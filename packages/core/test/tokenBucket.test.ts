import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as TokenBucket from "../src/tokenBucket.js"
import { prop } from "./support/prop.js"

const params = { capacity: 3, refillPerSecond: 2 } // one token every 500 ms

describe("core/tokenBucket", () => {
  it("starts full, refills continuously, and a denial changes nothing", () => {
    let s = TokenBucket.fresh
    for (const remaining of [2, 1, 0]) {
      const step = TokenBucket.take(s, 1, params, 0)
      expect(step.decision).toEqual({
        allowed: true,
        limit: 3,
        remaining,
        retryAfterMillis: 0,
        resetAfterMillis: 500 * (3 - remaining)
      })
      s = step.state
    }
    const denied = TokenBucket.take(s, 2, params, 250)
    expect(denied.decision).toEqual({
      allowed: false,
      limit: 3,
      remaining: 0,
      retryAfterMillis: 750,
      resetAfterMillis: 1250
    })
    expect(denied.state).toBe(s)
    expect(TokenBucket.take(s, 2, params, 1000).decision.allowed).toBe(true)
    expect(TokenBucket.take(s, 4, params, 1e9).decision.retryAfterMillis).toBe(Infinity)
  })

  it("a full bucket admits its whole capacity at epoch-scale instants (spans from now, not instants)", () => {
    const now = 1_700_000_000_000
    expect(TokenBucket.take(TokenBucket.fresh, 2, { capacity: 2, refillPerSecond: 22 }, now).decision.allowed).toBe(
      true
    )
    const full = TokenBucket.take(TokenBucket.fresh, 1, { capacity: 2, refillPerSecond: 22 }, now).state
    expect(TokenBucket.take(full, 2, { capacity: 2, refillPerSecond: 22 }, now + 91).decision.allowed).toBe(true)
  })

  const request = fc.record({ dt: fc.integer({ min: 0, max: 2000 }), cost: fc.integer({ min: 1, max: 6 }) })
  const bucket = fc.record({
    capacity: fc.integer({ min: 1, max: 5 }),
    refillPerSecond: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.double({ min: 0.01, max: 50, noNaN: true }))
  })

  prop(
    "never over capacity: admitted units over any run stay within capacity plus what refilled",
    [bucket, fc.array(request, { maxLength: 100 })],
    ([p, requests]) => {
      let s = TokenBucket.fresh
      let now = 1_700_000_000_000
      const start = now
      let taken = 0
      for (const r of requests) {
        now += r.dt
        const step = TokenBucket.take(s, r.cost, p, now)
        const d = step.decision
        expect(d.remaining).toBeGreaterThanOrEqual(0)
        expect(d.remaining).toBeLessThanOrEqual(p.capacity)
        expect(Number.isInteger(d.remaining)).toBe(true)
        // a stored instant is exact to 2^-12 ms at epoch scale
        expect(step.expiresAt - now).toBeLessThanOrEqual(p.capacity * 1000 / p.refillPerSecond + 1e-3)
        if (d.allowed) taken += r.cost
        else expect(step.state).toBe(s)
        s = step.state
        expect(taken).toBeLessThanOrEqual(p.capacity + ((now - start) * p.refillPerSecond) / 1000 + 1e-6)
      }
    }
  )

  prop(
    "monotonic in time, and waiting retryAfter is always enough",
    [bucket, fc.array(request, { maxLength: 30 }), request, fc.integer({ min: 0, max: 5000 })],
    ([p, history, next, later]) => {
      let s = TokenBucket.fresh
      let now = 1_700_000_000_000
      for (const r of history) {
        now += r.dt
        s = TokenBucket.take(s, r.cost, p, now).state
      }
      const d = TokenBucket.take(s, next.cost, p, now).decision
      if (d.allowed) expect(TokenBucket.take(s, next.cost, p, now + later).decision.allowed).toBe(true)
      else if (d.retryAfterMillis !== Infinity) {
        expect(TokenBucket.take(s, next.cost, p, now + d.retryAfterMillis).decision.allowed).toBe(true)
      } else expect(next.cost).toBeGreaterThan(p.capacity)
    }
  )
})
