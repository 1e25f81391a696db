import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Window from "../src/breakerWindow.js"
import { prop } from "./support/prop.js"

const countRate = (calls: number, minimumCalls = 1, threshold = 0.5): Window.Trip => ({
  _tag: "FailureRate",
  threshold,
  minimumCalls,
  window: { _tag: "Count", calls },
  slowCall: { millis: 100, rateThreshold: 0.5 }
})

const timeRate = (millis: number, buckets: number, minimumCalls = 1): Window.Trip => ({
  _tag: "FailureRate",
  threshold: 0.5,
  minimumCalls,
  window: { _tag: "Time", millis, buckets },
  slowCall: undefined
})

/** calls, failures and slow calls a window holds now, read from its snapshot */
const totals = (w: Window.Window) => {
  const s = Window.snapshot(w)
  switch (s._tag) {
    case "Consecutive":
      return { calls: s.failures, failures: s.failures, slow: 0 }
    case "Count":
      return {
        calls: s.outcomes.length,
        failures: s.outcomes.filter((o) => o & 1).length,
        slow: s.outcomes.filter((o) => o & 2).length
      }
    case "Time":
      return s.buckets.reduce(
        (t, [, calls, failures, slow]) => ({
          calls: t.calls + calls,
          failures: t.failures + failures,
          slow: t.slow + slow
        }),
        { calls: 0, failures: 0, slow: 0 }
      )
  }
}

describe("core/breakerWindow", () => {
  it("consecutive: trips on the n-th failure in a row; a success starts over", () => {
    const w = Window.make({ _tag: "Consecutive", failures: 3 })
    expect([true, true, false, true, true].map((f) => Window.record(w, f, false, 0))).toEqual([
      false,
      false,
      false,
      false,
      false
    ])
    expect(Window.record(w, true, false, 0)).toBe(true)
  })

  it("count: decides once minimumCalls are in, on the last `calls` only", () => {
    const w = Window.make(countRate(4, 3))
    expect(Window.record(w, true, false, 0)).toBe(false) // 1 call: too few
    expect(Window.record(w, true, false, 0)).toBe(false)
    expect(Window.record(w, false, false, 0)).toBe(true) // 2 of 3
    Window.reset(w)
    for (let i = 0; i < 4; i++) Window.record(w, false, false, 0)
    expect(Window.record(w, false, true, 0)).toBe(false) // 1 slow in 4
    expect(Window.record(w, false, true, 0)).toBe(true) // 2 slow in 4
    expect(Window.snapshot(w)).toEqual({ _tag: "Count", size: 4, outcomes: [0, 0, 2, 2] })
  })

  it("time: drops whole buckets as time passes, and a clock stepping back records into the newest", () => {
    const w = Window.make(timeRate(1000, 10, 2))
    expect(Window.record(w, true, false, 0)).toBe(false) // one call: too few
    expect(Window.record(w, false, false, 950)).toBe(true) // 1 of 2 failed: the rate reaches 0.5
    Window.reset(w)
    Window.record(w, true, false, 50)
    Window.record(w, true, false, 1099) // the bucket of 50 left at 1000
    expect(totals(w)).toEqual({ calls: 1, failures: 1, slow: 0 })
    Window.record(w, false, false, 500)
    expect(Window.snapshot(w)).toEqual({ _tag: "Time", bucketMillis: 100, buckets: [[10, 2, 1, 0]] })
  })

  it("time: a time before the epoch or not finite counts as the epoch, and its calls expire like others", () => {
    const w = Window.make(timeRate(1000, 10, 3))
    Window.record(w, true, false, -500)
    Window.record(w, true, false, Number.NaN)
    // both were counted in the epoch's bucket, which has left the window by t = 1e6
    expect(Window.record(w, false, false, 1e6)).toBe(false)
    expect(totals(w)).toEqual({ calls: 1, failures: 0, slow: 0 })
    Window.record(w, true, false, Infinity)
    expect(totals(w)).toEqual({ calls: 2, failures: 1, slow: 0 })
  })

  it("restore takes a snapshot of the same policy and ignores anything else", () => {
    const w = Window.make(countRate(3))
    Window.restore(w, { _tag: "Count", size: 3, outcomes: [1, 0, 3] })
    expect(totals(w)).toEqual({ calls: 3, failures: 2, slow: 1 })
    for (const bad of [null, 1, { _tag: "Count", size: 4, outcomes: [] }, { kind: "count", size: 3, outcomes: [] }]) {
      Window.restore(w, bad)
      expect(totals(w)).toEqual({ calls: 3, failures: 2, slow: 1 })
    }
    const t = Window.make(timeRate(1000, 10))
    Window.restore(t, { _tag: "Time", bucketMillis: 100, buckets: [[5, 2, 1, 0], [6, 1, 2, 0], [7, "1", 0, 0]] })
    expect(totals(t)).toEqual({ calls: 2, failures: 1, slow: 0 })
  })

  const event = fc.record({
    failed: fc.boolean(),
    slow: fc.boolean(),
    // time moves forward mostly, backwards sometimes
    dt: fc.integer({ min: -50, max: 400 })
  })
  const trip = fc.oneof(
    fc.integer({ min: 1, max: 5 }).map((n): Window.Trip => ({ _tag: "Consecutive", failures: n })),
    fc.integer({ min: 1, max: 8 }).map((n) => countRate(n)),
    fc.tuple(fc.integer({ min: 1, max: 2000 }), fc.integer({ min: 1, max: 8 })).map(([d, b]) => timeRate(d, b))
  )

  prop(
    "counts are never negative, slow and failed never exceed the calls, and a snapshot restores the same counts",
    [trip, fc.array(event, { maxLength: 100 })],
    ([policy, events]) => {
      const w = Window.make(policy)
      let now = 1_000_000
      for (const e of events) {
        now += e.dt
        Window.record(w, e.failed, e.slow, now)
        const t = totals(w)
        expect(t.failures).toBeGreaterThanOrEqual(0)
        expect(t.slow).toBeGreaterThanOrEqual(0)
        expect(t.failures).toBeLessThanOrEqual(t.calls)
        expect(t.slow).toBeLessThanOrEqual(t.calls)
        if (w._tag === "Count") expect(t.calls).toBeLessThanOrEqual(w.size)
        if (w._tag === "Time") {
          expect([w.totalCalls, w.totalFailures, w.totalSlow]).toEqual([t.calls, t.failures, t.slow])
        }
      }
      const copy = Window.make(policy)
      Window.restore(copy, JSON.parse(JSON.stringify(Window.snapshot(w))))
      expect(Window.snapshot(copy)).toEqual(Window.snapshot(w))
    }
  )

  prop(
    "the decision is the rule: open exactly when the rates over the window reach the thresholds",
    [fc.integer({ min: 1, max: 10 }), fc.array(fc.tuple(fc.boolean(), fc.boolean()), { minLength: 1, maxLength: 60 })],
    ([size, outcomes]) => {
      const policy = countRate(size, Math.min(size, 3))
      const w = Window.make(policy)
      let trips = false
      for (const [failed, slow] of outcomes) trips = Window.record(w, failed, slow, 0)
      const t = totals(w)
      expect(trips).toBe(
        policy._tag === "FailureRate" && Window.exceeds(policy, t.calls, t.failures, t.slow)
      )
    }
  )
})
