import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as RateLimitHeaders from "../../src/core/rateLimitHeaders.js"

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

  it.prop("a policy of valid names and integers reads back as written", [
    fc.array(fc.record({ name, quota: count, window: fc.option(count, { nil: undefined }) }), { minLength: 1 })
  ], ([policies]) => {
    const back = RateLimitHeaders.parsePolicy(RateLimitHeaders.formatPolicy(policies))
    expect(back).toEqual(policies.map((p) => p.window === undefined ? { name: p.name, quota: p.quota } : p))
  })

  it.prop("formatting never promises more than there is", [fc.double(), fc.double()], ([remaining, reset]) => {
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
})
