import fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { Decision } from "../src/rateLimit.js"
import * as RateLimitHeaders from "../src/rateLimitHeaders.js"
import * as RateWindows from "../src/rateWindows.js"
import * as TokenBucket from "../src/tokenBucket.js"
import { prop } from "./support/prop.js"

const name = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 10 })
const count = fc.integer({ min: 0, max: 999_999_999_999_999 })

describe("core/rateLimitHeaders", () => {
  it("writes and reads both fields", () => {
    const policy = RateLimitHeaders.formatPolicy([{ name: "burst", quota: 100, window: 60 }, { name: "d", quota: 1 }])
    expect(policy).toBe("\"burst\";q=100;w=60,\"d\";q=1")
    expect(RateLimitHeaders.parsePolicy(policy)).toEqual([{ name: "burst", quota: 100, window: 60 }, {
      name: "d",
      quota: 1
    }])
    expect(RateLimitHeaders.parseRateLimit("default;r=5;t=2;pk=:YWJj:")).toEqual([{
      name: "default",
      remaining: 5,
      reset: 2
    }])
  })

  it("rejects an empty list, a missing or negative quota, and inner lists", () => {
    for (const v of ["", "\"a\"", "\"a\";q=-1", "\"a\";q=1.5", "(\"a\");q=1", "\"a\";q=1;w=x", "1;q=1"]) {
      expect(RateLimitHeaders.parsePolicy(v), v).toBeUndefined()
    }
  })

  prop("a policy of valid names and integers reads back as written", [
    fc.array(fc.record({ name, quota: count, window: fc.option(count, { nil: undefined }) }), { minLength: 1 })
  ], ([policies]) => {
    const back = RateLimitHeaders.parsePolicy(RateLimitHeaders.formatPolicy(policies))
    expect(back).toEqual(policies.map((p) => p.window === undefined ? { name: p.name, quota: p.quota } : p))
  })

  prop("formatting never promises more than there is", [fc.double(), fc.double()], ([remaining, reset]) => {
    const [parsed] = RateLimitHeaders.parseRateLimit(RateLimitHeaders.formatRateLimit({ name: "n", remaining, reset }))!
    expect(parsed!.remaining).toBeGreaterThanOrEqual(0)
    if (remaining >= 0 && remaining < 1e15) expect(parsed!.remaining).toBeLessThanOrEqual(remaining)
    if (reset >= 0 && reset < 1e14) expect(parsed!.reset).toBeGreaterThanOrEqual(reset)
  })

  it("the middleware's numbers: a window of at least a second, a retry of at least a second", () => {
    expect(RateLimitHeaders.policyFor("api", 10, 200)).toBe("\"api\";q=10;w=1")
    expect(RateLimitHeaders.stateFor("api", 3, 1500)).toBe("\"api\";r=3;t=2")
    expect(RateLimitHeaders.retryAfterSeconds(0)).toBe(1)
    expect(RateLimitHeaders.retryAfterSeconds(2001)).toBe(3)
    expect(RateLimitHeaders.isValidName("ü")).toBe(false)
  })

  describe("t: when more quota is made available (draft-11), so r=0 says when to come back", () => {
    const quota = (
      algorithm: RateLimitHeaders.Quota["algorithm"],
      limit: number,
      windowMillis: number,
      d: Decision
    ): RateLimitHeaders.Quota => ({
      algorithm,
      limit,
      windowMillis,
      allowed: d.allowed,
      remaining: d.remaining,
      retryAfterMillis: d.retryAfterMillis,
      resetAfterMillis: d.resetAfterMillis
    })

    it("a token bucket that just gave its last token says: one refill interval, not the time to refill it all", () => {
      // 20 tokens, 2 per second: emptied at once, the next token is 500 ms away and the bucket full in 10 s
      const params = { capacity: 20, refillPerSecond: 2 }
      let last = TokenBucket.take(TokenBucket.fresh, 1, params, 0)
      for (let i = 1; i < 20; i++) last = TokenBucket.take(last.state, 1, params, 0)
      expect(last.decision).toMatchObject({ allowed: true, remaining: 0, resetAfterMillis: 10_000 })
      const t = RateLimitHeaders.nextQuotaMillis(quota("token-bucket", 20, 10_000, last.decision))
      expect(t).toBe(500)
      expect(RateLimitHeaders.stateFor("api", 0, t)).toBe("\"api\";r=0;t=1")
    })

    it("a refusal says the same moment as its Retry-After", () => {
      const denied: Decision = {
        allowed: false,
        limit: 5,
        remaining: 0,
        retryAfterMillis: 1_200,
        resetAfterMillis: 9_000
      }
      const t = RateLimitHeaders.nextQuotaMillis(quota("fixed-window", 5, 10_000, denied))
      expect(RateLimitHeaders.secondsOf(t)).toBe(RateLimitHeaders.retryAfterSeconds(denied.retryAfterMillis))
    })

    const takes = fc.array(fc.tuple(fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 1, max: 3 })), {
      minLength: 1,
      maxLength: 40
    })

    prop("token bucket: at t, the next unit is there, and t is at most one refill interval away", [
      fc.integer({ min: 1, max: 50 }),
      fc.integer({ min: 1, max: 100 }),
      takes
    ], ([capacity, refill, steps]) => {
      const params = { capacity, refillPerSecond: refill / 10 }
      const windowMillis = (capacity / params.refillPerSecond) * 1000
      let state = TokenBucket.fresh
      let now = 0
      for (const [gap, cost] of steps) {
        now += gap
        const step = TokenBucket.take(state, cost, params, now)
        state = step.state
        if (!step.decision.allowed || step.decision.remaining >= capacity) continue
        const t = RateLimitHeaders.nextQuotaMillis(quota("token-bucket", capacity, windowMillis, step.decision))
        expect(t).toBeLessThanOrEqual(1000 / params.refillPerSecond + 1)
        expect(TokenBucket.take(state, step.decision.remaining + 1, params, now + t).decision.allowed).toBe(true)
      }
    })

    prop("fixed and sliding window: at t a request of one unit fits, and t is never after the full reset", [
      fc.integer({ min: 1, max: 20 }),
      fc.integer({ min: 100, max: 5_000 }),
      takes,
      fc.boolean()
    ], ([limit, windowMillis, steps, sliding]) => {
      const params = { limit, windowMillis }
      const run = sliding ? RateWindows.slidingWindow : RateWindows.fixedWindow
      let state = RateWindows.fresh
      let now = 1_000_000
      for (const [gap, cost] of steps) {
        now += gap
        const step = run(state, cost, params, now)
        state = step.state
        if (!step.decision.allowed || step.decision.remaining > 0) continue
        const algorithm = sliding ? "sliding-window" : "fixed-window"
        const t = RateLimitHeaders.nextQuotaMillis(quota(algorithm, limit, windowMillis, step.decision))
        expect(t).toBeLessThanOrEqual(step.decision.resetAfterMillis)
        expect(run(state, 1, params, now + t).decision.allowed).toBe(true)
      }
    })
  })
})
