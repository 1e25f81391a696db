import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Limit from "../../src/core/adaptiveLimit.js"

const bounds = { minLimit: 2, maxLimit: 100, initialLimit: 10 }
const configs: ReadonlyArray<Limit.Config> = [
  { bounds, algorithm: Limit.defaults.aimd },
  { bounds, algorithm: Limit.defaults.vegas },
  { bounds, algorithm: Limit.defaults.gradient2 }
]

const run = (config: Limit.Config, samples: ReadonlyArray<Limit.Sample>, random = 0.5) =>
  samples.reduce((state, sample) => Limit.update(config, state, sample, random), Limit.initial(config, random))

const repeat = (n: number, sample: Limit.Sample) => Array.from({ length: n }, () => sample)

const arbitrarySample = fc.record({
  rttMillis: fc.oneof(fc.double({ min: 0, max: 10_000, noNaN: true }), fc.constantFrom(NaN, -1, Infinity)),
  inflight: fc.integer({ min: 0, max: 200 }),
  dropped: fc.boolean()
})

describe("core/adaptiveLimit", () => {
  it.prop(
    "every algorithm keeps the limit within its bounds, whatever it is fed",
    [fc.constantFrom(0, 1, 2), fc.array(arbitrarySample, { maxLength: 300 }), fc.double({ min: 0, max: 0.999 })],
    ([which, samples, random]) => {
      const config = configs[which]!
      let state = Limit.initial(config, random)
      for (const sample of samples) {
        state = Limit.update(config, state, sample, random)
        const limit = Limit.limitOf(config, state)
        expect(Number.isInteger(limit)).toBe(true)
        expect(limit).toBeGreaterThanOrEqual(bounds.minLimit)
        expect(limit).toBeLessThanOrEqual(bounds.maxLimit)
        expect(Number.isFinite(state.estimate)).toBe(true)
      }
    }
  )

  it.prop(
    "no algorithm grows the limit while the caller uses less than half of it",
    [fc.constantFrom(0, 1, 2), fc.array(fc.double({ min: 1, max: 1_000, noNaN: true }), { maxLength: 200 })],
    ([which, rtts]) => {
      const config = configs[which]!
      const state = run(config, rtts.map((rttMillis) => ({ rttMillis, inflight: 4, dropped: false })))
      expect(Limit.limitOf(config, state)).toBeLessThanOrEqual(bounds.initialLimit)
    }
  )

  it("a sample with a broken RTT changes nothing", () => {
    for (const config of configs) {
      const state = Limit.initial(config, 0.5)
      for (const rttMillis of [NaN, -5, Infinity]) {
        expect(Limit.update(config, state, { rttMillis, inflight: 10, dropped: true }, 0.5)).toBe(state)
      }
    }
  })

  describe("AIMD", () => {
    const config: Limit.Config = { bounds, algorithm: { _tag: "Aimd", backoffRatio: 0.5, timeoutMillis: 100 } }

    it("adds one per good sample near the limit and halves on a drop or a timeout", () => {
      const grown = run(config, repeat(5, { rttMillis: 10, inflight: 10, dropped: false }))
      expect(Limit.limitOf(config, grown)).toBe(15)
      expect(Limit.limitOf(config, Limit.update(config, grown, { rttMillis: 10, inflight: 15, dropped: true }, 0)))
        .toBe(7)
      expect(Limit.limitOf(config, Limit.update(config, grown, { rttMillis: 101, inflight: 15, dropped: false }, 0)))
        .toBe(7)
    })

    it("never goes below minLimit nor above maxLimit", () => {
      expect(Limit.limitOf(config, run(config, repeat(50, { rttMillis: 1, inflight: 1, dropped: true })))).toBe(2)
      expect(Limit.limitOf(config, run(config, repeat(500, { rttMillis: 1, inflight: 100, dropped: false })))).toBe(100)
    })
  })

  describe("Vegas", () => {
    const config: Limit.Config = { bounds, algorithm: { ...Limit.defaults.vegas, probeMultiplier: 1_000 } }

    it("grows quickly while the RTT stays at its no-load value", () => {
      const state = run(config, repeat(5, { rttMillis: 20, inflight: 100, dropped: false }))
      // first sample sets rttNoLoad; each of the next four adds beta = 6 · log10Root(limit)
      expect(Limit.limitOf(config, state)).toBe(10 + 4 * 6)
    })

    it("shrinks when the estimated queue passes beta, and on drops", () => {
      const loaded = run(config, [
        { rttMillis: 20, inflight: 100, dropped: false },
        ...repeat(20, { rttMillis: 20, inflight: 100, dropped: false })
      ])
      const before = Limit.limitOf(config, loaded)
      const queued = Limit.update(config, loaded, { rttMillis: 200, inflight: 100, dropped: false }, 0.5)
      expect(Limit.limitOf(config, queued)).toBeLessThan(before)
      const dropped = Limit.update(config, loaded, { rttMillis: 20, inflight: 100, dropped: true }, 0.5)
      expect(Limit.limitOf(config, dropped)).toBeLessThan(before)
    })

    it("re-probes the no-load RTT, so a dependency that got slower for good is learnt", () => {
      const probing: Limit.Config = { bounds, algorithm: { ...Limit.defaults.vegas, probeMultiplier: 1 } }
      let state = run(probing, [{ rttMillis: 10, inflight: 1, dropped: false }])
      expect(state.rttNoLoad).toBe(10)
      for (let i = 0; i < 20 && state.rttNoLoad === 10; i++) {
        state = Limit.update(probing, state, { rttMillis: 50, inflight: 1, dropped: false }, 0.5)
      }
      expect(state.rttNoLoad).toBe(50)
    })

    it("settles where the queue it estimates is between alpha and beta: smaller bounds, a lower limit", () => {
      // a dependency of concurrency 4 and 20 ms per call, driven at the limit: RTT grows with the line
      const settle = (alpha: number, beta: number) => {
        const c: Limit.Config = { bounds, algorithm: { ...Limit.defaults.vegas, probeMultiplier: 1_000, alpha, beta } }
        // one call alone first: the no-load RTT is learnt before the line forms
        let state = Limit.update(c, Limit.initial(c, 0.5), { rttMillis: 20, inflight: 1, dropped: false }, 0.5)
        for (let i = 0; i < 200; i++) {
          const inflight = Limit.limitOf(c, state)
          state = Limit.update(c, state, { rttMillis: 20 * Math.max(1, inflight / 4), inflight, dropped: false }, 0.5)
        }
        return Limit.limitOf(c, state)
      }
      const standard = settle(3, 6) // queue = limit - 4 held in [3, 6]
      const tight = settle(1, 2)
      expect(standard - 4).toBeGreaterThanOrEqual(3)
      expect(standard - 4).toBeLessThanOrEqual(6 + 1)
      expect(tight - 4).toBeGreaterThanOrEqual(1)
      expect(tight - 4).toBeLessThanOrEqual(2 + 1)
    })
  })

  describe("Gradient2", () => {
    const config: Limit.Config = { bounds, algorithm: { ...Limit.defaults.gradient2, smoothing: 1 } }

    it("grows by the queue size while latency is steady and shrinks when it climbs", () => {
      const steady = run(config, repeat(3, { rttMillis: 10, inflight: 100, dropped: false }))
      expect(Limit.limitOf(config, steady)).toBe(10 + 3 * 4)
      const slow = run(config, [
        ...repeat(20, { rttMillis: 10, inflight: 100, dropped: false }),
        ...repeat(5, { rttMillis: 100, inflight: 100, dropped: false })
      ])
      const fast = run(config, repeat(25, { rttMillis: 10, inflight: 100, dropped: false }))
      expect(Limit.limitOf(config, slow)).toBeLessThan(Limit.limitOf(config, fast))
    })

    it("halves (plus the queue) on a drop", () => {
      const steady = run(config, repeat(3, { rttMillis: 10, inflight: 100, dropped: false }))
      const after = Limit.update(config, steady, { rttMillis: 10, inflight: 100, dropped: true }, 0)
      expect(after.estimate).toBeCloseTo(steady.estimate * 0.5 + 4)
    })
  })

  it("log10Root is at least 1 and grows by one per decade", () => {
    expect([0, 1, 9, 10, 99, 100, 1_000].map(Limit.log10Root)).toEqual([1, 1, 1, 1, 1, 2, 3])
  })
})
