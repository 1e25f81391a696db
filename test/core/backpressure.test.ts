import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Backpressure from "../../src/core/backpressure.js"

describe("core/backpressure", () => {
  it("a 429 or 503 with Retry-After pauses the origin; other statuses do not", () => {
    expect(Backpressure.pauseMillis(429, 2_000, undefined, 60_000)).toBe(2_000)
    expect(Backpressure.pauseMillis(503, 500, undefined, 60_000)).toBe(500)
    expect(Backpressure.pauseMillis(500, 2_000, undefined, 60_000)).toBeUndefined()
    expect(Backpressure.pauseMillis(429, undefined, undefined, 60_000)).toBeUndefined()
    expect(Backpressure.pauseMillis(429, 0, undefined, 60_000)).toBeUndefined()
  })

  it("a RateLimit item with no quota left pauses the origin for its reset, on any status", () => {
    expect(Backpressure.pauseMillis(200, undefined, [{ name: "default", remaining: 0, reset: 7 }], 60_000)).toBe(7_000)
    expect(Backpressure.pauseMillis(200, undefined, [{ name: "default", remaining: 3, reset: 7 }], 60_000))
      .toBeUndefined()
    expect(Backpressure.pauseMillis(200, undefined, [{ name: "default", remaining: 0 }], 60_000)).toBeUndefined()
    // the longer of the two asks wins
    expect(Backpressure.pauseMillis(429, 2_000, [{ name: "d", remaining: 0, reset: 5 }], 60_000)).toBe(5_000)
  })

  it.prop(
    "a pause is never negative, never NaN and never longer than the cap",
    [
      fc.integer({ min: 100, max: 599 }),
      fc.option(fc.double({ noNaN: false }), { nil: undefined }),
      fc.array(fc.record({ name: fc.string(), remaining: fc.integer({ min: 0, max: 3 }), reset: fc.double() })),
      fc.integer({ min: 1, max: 100_000 })
    ],
    ([status, retryAfter, limits, max]) => {
      const pause = Backpressure.pauseMillis(status, retryAfter, limits, max)
      if (pause !== undefined) {
        expect(pause).toBeGreaterThan(0)
        expect(pause).toBeLessThanOrEqual(max)
      }
    }
  )

  it("a request waits for the pause, or gives up when its deadline comes first", () => {
    expect(Backpressure.hold(undefined, 1_000, undefined)).toEqual({ _tag: "Go" })
    expect(Backpressure.hold(900, 1_000, undefined)).toEqual({ _tag: "Go" })
    expect(Backpressure.hold(3_000, 1_000, undefined)).toEqual({ _tag: "Wait", millis: 2_000 })
    expect(Backpressure.hold(3_000, 1_000, 5_000)).toEqual({ _tag: "Wait", millis: 2_000 })
    expect(Backpressure.hold(3_000, 1_000, 2_000)).toEqual({ _tag: "GiveUp", until: 3_000 })
  })
})
