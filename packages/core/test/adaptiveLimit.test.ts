import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Limit from "../src/adaptiveLimit.js"
import { prop } from "./support/prop.js"

const bounds = { minLimit: 2, maxLimit: 100, initialLimit: 10 }
const configs: ReadonlyArray<Limit.Config> = [
  { bounds, algorithm: Limit.defaults.aimd },
  { bounds, algorithm: Limit.defaults.vegas },
  { bounds, algorithm: Limit.defaults.gradient2 },
  { bounds, algorithm: Limit.defaults.windowedVegas },
  { bounds, algorithm: { _tag: "Windowed", ...Limit.defaults.windowed, algorithm: Limit.defaults.vegas } }
]

const run = (config: Limit.Config, samples: ReadonlyArray<Limit.Sample>, random = 0.5) =>
  samples.reduce((state, sample) => Limit.update(config, state, sample, random), Limit.initial(config, random))

const repeat = (n: number, sample: Limit.Sample) => Array.from({ length: n }, () => sample)

const arbitrarySample = fc.record({
  rttMillis: fc.oneof(fc.double({ min: 0, max: 10_000, noNaN: true }), fc.constantFrom(NaN, -1, Infinity)),
  inflight: fc.integer({ min: 0, max: 200 }),
  dropped: fc.boolean()
})

/** LoadShedMiddleware's default algorithm. */
const shedding: Limit.Algorithm = { ...Limit.defaults.windowedVegas, alpha: 2, beta: 4 }

/** The state after 40 calls made one at a time, 20 ms each (a share of them fast answers, 0.1 ms). */
const unloaded = (config: Limit.Config, fastShare = 0) =>
  run(
    config,
    Array.from({ length: 40 }, (_, i) => ({ rttMillis: isFast(i, fastShare) ? 0.1 : 20, inflight: 1, dropped: false }))
  )

/** Call i is a fast answer when the running count of fast ones steps up: an even spread. */
const isFast = (i: number, share: number) => Math.floor((i + 1) * share) > Math.floor(i * share)

/**
 * Drives the algorithm at its limit for `n` calls in front of a resource of `workers` workers of `serviceMs` each,
 * served first in first out: an expensive call's RTT is its service time, stretched by the line when more expensive
 * calls are in flight than there are workers. A share of the calls are fast answers (0.1 ms, no resource). Returns
 * the limit and the line (expensive calls in flight minus the workers) at each call.
 */
const drive = (
  config: Limit.Config,
  from: Limit.State,
  n: number,
  options: { readonly workers: number; readonly serviceMs?: number; readonly fastShare?: number }
) => {
  const { fastShare = 0, serviceMs = 20, workers } = options
  const limits: Array<number> = []
  const lines: Array<number> = []
  let state = from
  for (let i = 0; i < n; i++) {
    const limit = Limit.limitOf(config, state)
    const expensive = limit * (1 - fastShare)
    limits.push(limit)
    lines.push(expensive - workers)
    const rttMillis = isFast(i, fastShare) ? 0.1 : serviceMs * Math.max(1, expensive / workers)
    state = Limit.update(config, state, { rttMillis, inflight: limit, dropped: false }, (i * 0.37) % 1)
  }
  return { state, limits, lines }
}

describe("core/adaptiveLimit", () => {
  prop(
    "every algorithm keeps the limit within its bounds, whatever it is fed",
    [fc.constantFrom(0, 1, 2, 3, 4), fc.array(arbitrarySample, { maxLength: 300 }), fc.double({ min: 0, max: 0.999 })],
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

  prop(
    "no algorithm grows the limit while the caller uses less than half of it",
    [fc.constantFrom(0, 1, 2, 3, 4), fc.array(fc.double({ min: 1, max: 1_000, noNaN: true }), { maxLength: 200 })],
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

  describe("Vegas: Netflix's VegasLimit, per sample (its VegasLimitTest, ported)", () => {
    /** Netflix's `VegasLimitTest.create()`: alpha 3, beta 6, smoothing 1, initial 10, max 20. */
    const netflix: Limit.Config = {
      bounds: { minLimit: 1, maxLimit: 20, initialLimit: 10 },
      algorithm: Limit.defaults.vegas
    }
    const feed = (config: Limit.Config, samples: ReadonlyArray<readonly [number, number]>) => {
      const limits: Array<number> = []
      let state = Limit.initial(config, 0.5)
      for (const [rttMillis, inflight] of samples) {
        state = Limit.update(config, state, { rttMillis, inflight, dropped: false }, 0.5)
        limits.push(Limit.limitOf(config, state))
      }
      return limits
    }

    it("largeLimitIncrease: no queue at 10,000 adds beta × log10(limit) = 24", () => {
      const config: Limit.Config = {
        bounds: { minLimit: 1, maxLimit: 20_000, initialLimit: 10_000 },
        algorithm: Limit.defaults.vegas
      }
      expect(feed(config, [[10_000, 5_000], [10_000, 6_000]])).toEqual([10_000, 10_024])
    })

    it("increaseLimit, decreaseLimit, noChangeIfWithinThresholds", () => {
      // the first sample is the no-load RTT; then no queue: + beta; 8 queued: − 1; 3 queued: between alpha and beta
      expect(feed(netflix, [[10, 10], [10, 11]])).toEqual([10, 16])
      expect(feed(netflix, [[10, 10], [50, 11]])).toEqual([10, 9])
      expect(feed(netflix, [[10, 10], [14, 14]])).toEqual([10, 10])
    })

    it("decreaseSmoothing, decreaseWithoutSmoothing (with the default decrease, limit − log10(limit))", () => {
      // Netflix's cases pass `decreaseFunction(l -> l / 2)`, an option this port does not have: with the default
      // decrease, 100 → 98 smoothed by half is 99, then 99 → 98 smoothed is 98.5
      const bounds = { minLimit: 1, maxLimit: 200, initialLimit: 100 }
      const smoothed: Limit.Config = { bounds, algorithm: { ...Limit.defaults.vegas, smoothing: 0.5 } }
      expect(feed(smoothed, [[10, 100], [20, 100], [20, 100]])).toEqual([100, 99, 98])
      expect(feed({ bounds, algorithm: Limit.defaults.vegas }, [[10, 100], [20, 100], [20, 100]])).toEqual([
        100,
        98,
        97
      ])
    })

    it("a drop takes log10(limit) off; a faster sample is the new no-load RTT and changes nothing else", () => {
      const warm = Limit.update(
        netflix,
        Limit.initial(netflix, 0.5),
        { rttMillis: 10, inflight: 10, dropped: false },
        0
      )
      const dropped = Limit.update(netflix, warm, { rttMillis: 12, inflight: 1, dropped: true }, 0)
      expect(Limit.limitOf(netflix, dropped)).toBe(9)
      const faster = Limit.update(netflix, warm, { rttMillis: 5, inflight: 10, dropped: true }, 0)
      expect([faster.rttNoLoad, faster.estimate]).toEqual([5, 10])
      // no RTT at all is refused, as Netflix throws on it
      expect(Limit.update(netflix, warm, { rttMillis: 0, inflight: 10, dropped: true }, 0)).toBe(warm)
    })

    it("every probeJitter × probeMultiplier × limit samples, the next sample is the no-load RTT, queued or not", () => {
      const config: Limit.Config = { ...netflix, algorithm: { ...Limit.defaults.vegas, probeMultiplier: 2 } }
      // jitter 0.5 + 0.5 / 2 = 0.75: a probe at the 15th sample (0.75 × 2 × 10)
      let state = Limit.initial(config, 0.5)
      state = Limit.update(config, state, { rttMillis: 10, inflight: 10, dropped: false }, 0.5)
      for (let i = 2; i < 15; i++) {
        state = Limit.update(config, state, { rttMillis: 14, inflight: 10, dropped: false }, 0.5)
        expect(state.rttNoLoad).toBe(10)
      }
      state = Limit.update(config, state, { rttMillis: 30, inflight: 10, dropped: false }, 0)
      expect([state.rttNoLoad, state.probeCount, state.probeJitter, Limit.limitOf(config, state)]).toEqual([
        30,
        0,
        0.5,
        10
      ])
    })

    prop(
      "per sample, the limit moves by at most beta × log10(limit), and only on a sample at least the no-load RTT",
      [fc.array(fc.record({ rtt: fc.double({ min: 1, max: 100, noNaN: true }), inflight: fc.nat(40) }), {
        maxLength: 200
      })],
      ([samples]) => {
        const config: Limit.Config = {
          bounds: { minLimit: 1, maxLimit: 1_000, initialLimit: 20 },
          algorithm: Limit.defaults.vegas
        }
        let state = Limit.initial(config, 0.3)
        for (const { inflight, rtt } of samples) {
          const next = Limit.update(config, state, { rttMillis: rtt, inflight, dropped: false }, 0.3)
          const step = 6 * Limit.log10Root(Math.floor(state.estimate))
          expect(Math.abs(next.estimate - state.estimate)).toBeLessThanOrEqual(step)
          if (next.estimate !== state.estimate) expect(rtt).toBeGreaterThanOrEqual(state.rttNoLoad)
          state = next
        }
      }
    )
  })

  describe("windowed Vegas (LoadShedMiddleware's)", () => {
    const config: Limit.Config = { bounds, algorithm: { ...Limit.defaults.windowedVegas, probeMultiplier: 1_000 } }
    /** A window of `n` samples: 10 (the default) or the limit, whichever is more. */
    const window = (n: number, sample: Limit.Sample) => repeat(n, sample)
    const at = (rttMillis: number, dropped = false): Limit.Sample => ({ rttMillis, inflight: 100, dropped })
    const then = (state: Limit.State, samples: ReadonlyArray<Limit.Sample>) =>
      samples.reduce((s, sample) => Limit.update(config, s, sample, 0.5), state)

    it("moves once per window of samples: grows fast while nothing queues, then by beta", () => {
      const first = run(config, window(9, at(20)))
      expect(Limit.limitOf(config, first)).toBe(10)
      expect(first.rttNoLoad).toBe(Infinity)
      // the 10th sample closes the window: its RTT is the no-load RTT, nothing queued, slow start adds
      // max(beta, half the limit), beta = 6 · log10Root(limit)
      const grown = Limit.update(config, first, at(20), 0.5)
      expect(grown.rttNoLoad).toBe(20)
      expect(Limit.limitOf(config, grown)).toBe(16)
      // the next window holds 16 samples (the limit)
      expect(Limit.limitOf(config, then(grown, window(15, at(20))))).toBe(16)
      expect(Limit.limitOf(config, then(grown, window(16, at(20))))).toBe(24)
      // a window that saw a queue ends the slow start: 16 × (1 − 20/30) = 6 queued is within [3, 6], then beta
      const queued = then(grown, window(16, at(30)))
      expect(queued.slowStart).toBe(false)
      expect(Limit.limitOf(config, queued)).toBe(16)
      expect(Limit.limitOf(config, then(queued, window(16, at(20))))).toBe(22)
    })

    it("shrinks straight to where beta calls would queue, at most by half per window, and on drops", () => {
      const loaded = run(config, window(10, at(20)))
      expect(Limit.limitOf(config, loaded)).toBe(16)
      const next = (rttMillis: number, drops = 0) =>
        then(loaded, [...window(drops, at(rttMillis, true)), ...window(16 - drops, at(rttMillis))]).estimate
      expect(next(25)).toBe(16) // 16 × (1 − 20/25) = 4 queued: within [alpha, beta] = [3, 6]
      expect(next(40)).toBeCloseTo(16 * 20 / 40 + 6) // 8 queued: to where 6 would be, in one window
      expect(next(400)).toBe(8) // at most halving
      expect(next(20, 1)).toBe(15) // a drop: − log10Root
      expect(next(20, 3)).toBe(13)
    })

    it("leaves out the calls that started under a lower limit than the one in force", () => {
      const grown = run(config, window(10, at(20)))
      expect(Limit.limitOf(config, grown)).toBe(16)
      // calls admitted while the limit was 10 end fast: they must not talk it into growing again
      const stale = then(grown, window(40, { ...at(20), limit: 10 }))
      expect(stale.estimate).toBe(16)
      expect(stale.window.samples).toBe(0)
      // a drop among them still counts
      const dropped = then(grown, window(10, { ...at(20, true), limit: 10 }))
      expect(dropped.estimate).toBe(8)
    })

    it("settles where the queue it estimates is between alpha and beta: smaller bounds, a lower limit", () => {
      // a dependency of concurrency 4 and 20 ms per call, driven at the limit: RTT grows with the line
      const settle = (alpha: number, beta: number) => {
        const c: Limit.Config = {
          bounds,
          algorithm: { ...Limit.defaults.windowedVegas, probeMultiplier: 1_000, alpha, beta }
        }
        return Limit.limitOf(c, drive(c, unloaded(c), 2_000, { workers: 4 }).state)
      }
      const standard = settle(3, 6) // queue = limit - 4 held in [3, 6]
      const tight = settle(1, 2)
      expect(standard - 4).toBeGreaterThanOrEqual(3)
      expect(standard - 4).toBeLessThanOrEqual(6)
      expect(tight - 4).toBeGreaterThanOrEqual(1)
      expect(tight - 4).toBeLessThanOrEqual(2)
    })

    it("re-probes by draining first: a dependency that got slower for good is learnt, and the queue does not grow", () => {
      const probing: Limit.Config = { bounds, algorithm: { ...Limit.defaults.windowedVegas, probeMultiplier: 2 } }
      // 4 workers, 20 ms: settled at 4 + beta
      let { state } = drive(probing, unloaded(probing), 400, { workers: 4 })
      expect(state.rttNoLoad).toBe(20)
      // the dependency now takes 50 ms a call: the line looks longer, the limit falls, a probe drains it
      const after = drive(probing, state, 2_000, { workers: 4, serviceMs: 50 })
      state = after.state
      expect(state.rttNoLoad).toBe(50)
      expect(after.limits.some((l) => l <= 4)).toBe(true) // drained to the workers, at some point
      expect(Limit.limitOf(probing, state)).toBeGreaterThanOrEqual(4)
      // probes every 2 × limit samples, yet the line in front of the workers never passed beta
      expect(Math.max(...after.limits.slice(400)) - 4).toBeLessThanOrEqual(6)
    })

    it("an instant answer is no RTT: it never becomes the no-load RTT", () => {
      const state = run(config, window(5, at(10)))
      expect(Limit.update(config, state, at(0), 0.5)).toBe(state)
      // instant calls among calls of 10 ms: the window's RTT is 10 ms
      const mixed = run(config, [...window(30, at(0)), ...window(10, at(10))])
      expect(mixed.rttNoLoad).toBe(10)
      // an instant drop is still a drop
      const dropped = run(config, window(10, at(0, true)))
      expect(Limit.limitOf(config, dropped)).toBe(5)
    })

    it("one fast answer does not pin the limit: the resource stays busy and its line short", () => {
      for (const workers of [4, 32]) {
        const c: Limit.Config = { bounds: { minLimit: 1, maxLimit: 1_000, initialLimit: 4 }, algorithm: shedding }
        const warm = unloaded(c)
        // a 400 answered in 0.1 ms, then orders as before
        const once = Limit.update(c, warm, { rttMillis: 0.1, inflight: 1, dropped: false }, 0.5)
        const { limits } = drive(c, once, 2_000, { workers })
        for (const limit of limits.slice(500)) {
          expect(limit).toBeGreaterThanOrEqual(workers)
          expect(limit - workers).toBeLessThanOrEqual(4)
        }
      }
    })

    prop(
      "a steady share of fast answers keeps the resource busy and its line short",
      // up to 70 %: beyond, at 32 workers, the expensive calls in a window are too few for its mean to tell one
      // queued call, and the limit stays below what the workers could take (see docs/overload.md)
      [fc.double({ min: 0, max: 0.7, noNaN: true }), fc.constantFrom(4, 32)],
      ([fastShare, workers]) => {
        const c: Limit.Config = { bounds: { minLimit: 1, maxLimit: 1_000, initialLimit: 4 }, algorithm: shedding }
        // the more the RTTs differ, the more samples a window takes: long runs, measured in their second half
        const lines = drive(c, unloaded(c, fastShare), 20_000, { workers, fastShare }).lines.slice(10_000)
        // the workers' share of time at work (a probe drains the line, and may leave a worker idle for a window)
        const busy = lines.reduce((sum, line) => sum + Math.min(1, 1 + line / workers), 0) / lines.length
        expect(busy).toBeGreaterThanOrEqual(0.95)
        // never much more than beta queued (the limit is a whole number of calls, which a mix does not divide,
        // and a mix makes the windows' RTTs noisy)
        expect(Math.max(...lines)).toBeLessThanOrEqual(4 + 2)
      },
      { fastCheck: { numRuns: 30 } }
    )

    prop(
      "one sample of any RTT among normal ones cannot pull the no-load RTT below the fastest normal one",
      [
        fc.array(fc.double({ min: 10, max: 30, noNaN: true }), { minLength: 60, maxLength: 200 }),
        fc.oneof(fc.double({ min: 0, max: 1e6 }), fc.constantFrom(0, Number.MIN_VALUE, NaN, -1, Infinity)),
        fc.nat(),
        fc.integer({ min: 1, max: 100 })
      ],
      ([normal, outlier, at, inflight]) => {
        const samples: Array<Limit.Sample> = normal.map((rttMillis) => ({ rttMillis, inflight, dropped: false }))
        samples.splice(at % (samples.length + 1), 0, { rttMillis: outlier, inflight, dropped: false })
        const probing: Limit.Config = { bounds, algorithm: { ...Limit.defaults.windowedVegas, probeMultiplier: 1 } }
        for (const c of [config, probing]) {
          let state = Limit.initial(c, 0.5)
          for (const [i, sample] of samples.entries()) {
            state = Limit.update(c, state, sample, (i * 0.37) % 1)
            if (state.rttNoLoad !== Infinity) expect(state.rttNoLoad).toBeGreaterThanOrEqual(Math.min(...normal))
          }
        }
      }
    )
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
