import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as core from "../src/visibility.js"
import { prop } from "./support/prop.js"

describe("core/visibility", () => {
  it("a delivery is invisible for the timeout and expired from its last instant on", () => {
    expect(core.invisibleUntil(1_000, 30)).toBe(1_030)
    expect(core.isExpired(1_000, 30, 1_029)).toBe(false)
    expect(core.isExpired(1_000, 30, 1_030)).toBe(true)
  })

  it("visibility timeouts are rounded up to whole milliseconds", () => {
    expect(core.visibilityMillis(100.5)).toBe(101)
    expect(core.visibilityMillis(100)).toBe(100)
  })

  it("a release is visible at once without a positive delay, else after it", () => {
    expect(core.visibleAfterRelease(1_000, 0)).toBeUndefined()
    expect(core.visibleAfterRelease(1_000, -5)).toBeUndefined()
    expect(core.visibleAfterRelease(1_000, 200)).toBe(1_200)
  })

  it("receive counts: one per delivery; undoReceive gives one back, never below zero", () => {
    expect(core.delivered(0)).toBe(1)
    expect(core.afterRelease(3, false)).toBe(3)
    expect(core.afterRelease(3, true)).toBe(2)
    expect(core.afterRelease(0, true)).toBe(0)
  })

  it("after a failure: fatal and last deliveries are dead-lettered, the others released", () => {
    expect(core.afterFailure(true, 1, 5)).toBe("DeadLetterFatal")
    expect(core.afterFailure(false, 4, 5)).toBe("Release")
    expect(core.afterFailure(false, 5, 5)).toBe("DeadLetterExhausted")
    expect(core.overLimit(5, 5)).toBe(false)
    expect(core.overLimit(6, 5)).toBe(true)
  })

  prop(
    "a message that always fails runs exactly maxReceiveCount times, then is dead-lettered",
    [fc.integer({ min: 1, max: 50 })],
    ([maxReceiveCount]) => {
      let count = 0
      let runs = 0
      for (;;) {
        count = core.delivered(count)
        if (core.overLimit(count, maxReceiveCount)) break
        runs++
        const next = core.afterFailure(false, count, maxReceiveCount)
        if (next !== "Release") {
          expect(next).toBe("DeadLetterExhausted")
          break
        }
        count = core.afterRelease(count, false)
      }
      expect(runs).toBe(maxReceiveCount)
    }
  )

  prop(
    "deliveries given back unprocessed never count: the limit is reached by runs only",
    [fc.integer({ min: 1, max: 20 }), fc.array(fc.boolean(), { maxLength: 100 })],
    ([maxReceiveCount, givenBack]) => {
      let count = 0
      let runs = 0
      for (const back of givenBack) {
        count = core.delivered(count)
        expect(core.overLimit(count, maxReceiveCount)).toBe(false)
        if (back) {
          count = core.afterRelease(count, true)
          continue
        }
        runs++
        if (core.afterFailure(false, count, maxReceiveCount) !== "Release") break
      }
      expect(count).toBe(runs)
      expect(runs).toBeLessThanOrEqual(maxReceiveCount)
    }
  )

  prop(
    "expiry is exactly the end of invisibility",
    [fc.integer({ min: 0, max: 1e12 }), fc.integer({ min: 1, max: 1e7 }), fc.integer({ min: -1e7, max: 2e7 })],
    ([receivedAt, visibility, offset]) => {
      const now = receivedAt + offset
      expect(core.isExpired(receivedAt, visibility, now)).toBe(now >= core.invisibleUntil(receivedAt, visibility))
    }
  )

  prop("rounding never shortens a timeout, and adds less than a millisecond", [
    fc.double({ min: 1, max: 1e9, noNaN: true })
  ], ([ms]) => {
    const rounded = core.visibilityMillis(ms)
    expect(Number.isInteger(rounded)).toBe(true)
    expect(rounded).toBeGreaterThanOrEqual(ms)
    expect(rounded - ms).toBeLessThan(1)
  })
  it("time limits: the visibility timeout by default; longer only for a source that can extend", () => {
    expect(core.defaultTimeLimit(30_000)).toBe(30_000)
    expect(core.defaultShutdownGrace(30_000)).toBe(10_000)
    expect(core.defaultShutdownGrace(2_000)).toBe(2_000)
    expect(core.timeLimitProblem(30_000, 30_000, false)).toBeUndefined()
    expect(core.timeLimitProblem(60_000, 30_000, true)).toBeUndefined()
    expect(core.timeLimitProblem(60_000, 30_000, false)).toMatch(/60000 ms is longer than .* 30000 ms/)
  })

  it("renewal: when a third of the visibility is left, never at once; retries while still invisible", () => {
    expect(core.renewAt(1_000, 1_000)).toBe(667)
    expect(core.renewAt(31_000, 30_000)).toBe(21_000)
    expect(core.renewAt(2, 2)).toBe(1) // at least a millisecond before the end
    expect(core.extendedUntil(667, 1_000)).toBe(1_667)
    // a handler whose limit ends before the first renewal is due needs none
    expect(core.needsRenewal(0, 600, 1_000, 1_000)).toBe(false)
    expect(core.needsRenewal(0, 1_000, 1_000, 1_000)).toBe(true)
    // one that waited in the buffer starts closer to the end
    expect(core.needsRenewal(500, 200, 1_000, 1_000)).toBe(true)
    expect(core.retryRenewAt(700, 1_000, 1_000)).toBe(800)
    expect(core.retryRenewAt(950, 1_000, 1_000)).toBeUndefined()
  })

  prop(
    "renewing at each renewAt keeps a delivery invisible for as long as its handler runs",
    [fc.integer({ min: 3, max: 1e6 }), fc.double({ min: 0, max: 50, noNaN: true })],
    ([visibility, timeouts]) => {
      const runFor = Math.ceil(visibility * timeouts)
      let visibleUntil = core.invisibleUntil(0, visibility)
      let now = 0
      let renewals = 0
      for (;;) {
        const at = core.renewAt(visibleUntil, visibility)
        expect(at).toBeGreaterThan(now) // never at once
        expect(at).toBeLessThan(visibleUntil) // always before it is visible again
        if (at >= runFor) break
        now = at
        visibleUntil = core.extendedUntil(now, visibility)
        renewals++
      }
      expect(visibleUntil).toBeGreaterThan(runFor)
      expect(renewals).toBeLessThanOrEqual(Math.ceil(runFor / Math.floor((2 * visibility) / 3)) + 1)
    }
  )
})
