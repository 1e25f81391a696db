import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Throttle from "../src/throttle.js"
import { prop } from "./support/prop.js"

const config: Throttle.Config = { windowMillis: 10_000, buckets: 10, k: 2, maxRejectionRate: 1 }

describe("core/throttle", () => {
  it("rejects nothing while the backend accepts everything", () => {
    const window = Throttle.makeWindow(config, 0)
    for (let i = 0; i < 1_000; i++) {
      expect(Throttle.admit(config, window, i, 0)).toBe(true)
      Throttle.recordAccept(config, window, i)
    }
    expect(Throttle.probabilityAt(config, window, 1_000)).toBe(0)
  })

  it("follows max(0, (requests − K·accepts) / (requests + 1))", () => {
    expect(Throttle.rejectProbability(0, 0, 2)).toBe(0)
    expect(Throttle.rejectProbability(100, 50, 2)).toBe(0)
    expect(Throttle.rejectProbability(100, 20, 2)).toBeCloseTo(60 / 101)
    expect(Throttle.rejectProbability(100, 0, 2)).toBeCloseTo(100 / 101)
  })

  it("lets through about K times what the backend accepts when it accepts a fraction", () => {
    const window = Throttle.makeWindow(config, 0)
    let sent = 0
    let accepted = 0
    // a seeded sequence of draws; the backend accepts every 10th request it receives
    let seed = 42
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648
    for (let t = 0; t < 5_000; t++) {
      if (!Throttle.admit(config, window, t, random())) continue
      sent++
      if (sent % 10 === 0) {
        accepted++
        Throttle.recordAccept(config, window, t)
      }
    }
    expect(sent / accepted).toBeGreaterThan(10)
    // the steady state sends K·accepts plus the noise of the draws; without throttling it would be 5,000
    expect(sent).toBeLessThan(1_000)
  })

  it("forgets an outage as its buckets leave the window", () => {
    const window = Throttle.makeWindow(config, 0)
    for (let i = 0; i < 100; i++) Throttle.admit(config, window, 0, 0.99)
    expect(Throttle.probabilityAt(config, window, 0)).toBeGreaterThan(0.9)
    expect(Throttle.probabilityAt(config, window, 9_999)).toBeGreaterThan(0.9)
    expect(Throttle.probabilityAt(config, window, 10_000)).toBe(0)
    expect(window.requests).toBe(0)
  })

  it("a time that is not finite never stops the window from sliding", () => {
    const window = Throttle.makeWindow(config, Number.NaN)
    Throttle.admit(config, window, Infinity, 0.5)
    Throttle.admit(config, window, 1_000, 0.99)
    expect(Throttle.probabilityAt(config, window, 1_000)).toBeGreaterThan(0)
    expect(Throttle.probabilityAt(config, window, 100_000)).toBe(0)
  })

  prop(
    "the counts are the sums of the buckets, never negative, whatever the order of events",
    [fc.array(fc.tuple(fc.boolean(), fc.integer({ min: -1_000, max: 40_000 }), fc.double({ min: 0, max: 0.999 })))],
    ([events]) => {
      const window = Throttle.makeWindow(config, 0)
      for (const [isAccept, now, random] of events) {
        if (isAccept) Throttle.recordAccept(config, window, now)
        else Throttle.admit(config, window, now, random)
        expect(window.requests).toBe(window.bucketRequests.reduce((a, b) => a + b, 0))
        expect(window.accepts).toBe(window.bucketAccepts.reduce((a, b) => a + b, 0))
        expect(window.requests).toBeGreaterThanOrEqual(0)
        const p = Throttle.probabilityAt(config, window, now)
        expect(p).toBeGreaterThanOrEqual(0)
        expect(p).toBeLessThan(1)
      }
    }
  )

  prop(
    "the rejection probability never exceeds maxRejectionRate, and a draw at or above it is always admitted",
    [
      fc.double({ min: 0, max: 1, noNaN: true }),
      fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 40_000 }), fc.double({ min: 0, max: 0.999 })))
    ],
    ([maxRejectionRate, events]) => {
      const capped: Throttle.Config = { ...config, maxRejectionRate }
      const uncapped = Throttle.makeWindow(config, 0)
      const window = Throttle.makeWindow(capped, 0)
      let now = 0
      for (const [isAccept, step, random] of events) {
        now += step % 1_000
        if (isAccept) {
          Throttle.recordAccept(capped, window, now)
          Throttle.recordAccept(config, uncapped, now)
          continue
        }
        const p = Throttle.probabilityAt(capped, window, now)
        expect(p).toBeLessThanOrEqual(maxRejectionRate)
        // the cap changes the probability only where the formula exceeds it
        expect(p).toBe(Math.min(maxRejectionRate, Throttle.probabilityAt(config, uncapped, now)))
        const admitted = Throttle.admit(capped, window, now, random)
        Throttle.admit(config, uncapped, now, random)
        if (random >= maxRejectionRate) expect(admitted).toBe(true)
      }
    }
  )

  it("the default cap is 0.9: under a total outage one call in ten still goes out", () => {
    expect(Throttle.defaults.maxRejectionRate).toBe(0.9)
    expect(Throttle.rejectProbability(1_000_000, 0, 2, Throttle.defaults.maxRejectionRate)).toBe(0.9)
    expect(Throttle.rejectProbability(1_000_000, 0, 2)).toBeGreaterThan(0.999)
  })
})
