import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as RttWindow from "../src/rttWindow.js"
import { prop } from "./support/prop.js"

const of = (rtts: ReadonlyArray<number>) => rtts.reduce((w, rtt) => RttWindow.add(w, rtt, 1, false), RttWindow.empty())

describe("core/rttWindow", () => {
  it("a window never sees a sample added to another window that came from the same one", () => {
    const base = of([10, 10, 10])
    const a = RttWindow.add(base, 1, 1, false)
    const b = RttWindow.add(base, 99, 2, true)
    const c = RttWindow.add(a, 5, 1, false)
    expect(a.rtts.slice(0, a.rttCount)).toEqual([10, 10, 10, 1])
    expect(b.rtts.slice(0, b.rttCount)).toEqual([10, 10, 10, 99])
    expect(c.rtts.slice(0, c.rttCount)).toEqual([10, 10, 10, 1, 5])
    expect(base.rttCount).toBe(3)
    expect([b.samples, b.maxInflight, b.drops]).toEqual([4, 2, 1])
    // a sample without an RTT that counts still counts as a sample
    expect(RttWindow.add(base, undefined, 1, false)).toMatchObject({ rttCount: 3, samples: 4 })
  })

  it("the trimmed mean leaves out a tenth at each end, and needs 10 RTTs", () => {
    expect(RttWindow.trimmedMean(of([1, 2, 3, 4, 5, 6, 7, 8, 9]), 0)).toBeUndefined()
    expect(RttWindow.trimmedMean(of([0, 2, 2, 2, 2, 2, 2, 2, 2, 1_000]), 0)).toBe(2)
    expect(RttWindow.trimmedMean(of([5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]), 0, 10)).toBe(1)
  })

  prop(
    "one RTT of any size cannot move the trimmed mean outside the range of the others",
    [
      fc.array(fc.double({ min: 1, max: 100, noNaN: true }), { minLength: 9, maxLength: 100 }),
      fc.double({
        min: 0,
        max: 1e9,
        noNaN: true
      })
    ],
    ([others, outlier]) => {
      const mean = RttWindow.trimmedMean(of([...others, outlier]), 0)!
      expect(mean).toBeGreaterThanOrEqual(Math.min(...others))
      expect(mean).toBeLessThanOrEqual(Math.max(...others))
    }
  )

  it("a spread window needs more RTTs to be precise; a shift in its latest stretch is seen, noise is not", () => {
    expect(RttWindow.needed(of([10, 10, 10, 10]), 0.01)).toBe(0)
    // half at 0.1 ms, half at 20 ms: a coefficient of variation near 1
    const mix = of(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? 0.1 : 20)))
    expect(RttWindow.needed(mix, 0.1)).toBeGreaterThan(90)
    expect(RttWindow.shifted(mix, 20)).toBe(false)
    expect(RttWindow.shifted(of([...Array(20).fill(400), ...Array(20).fill(1_000)].map((r, i) => r + i % 3)), 20))
      .toBe(true)
  })
})
