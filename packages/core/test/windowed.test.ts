import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Limit from "../src/adaptiveLimit.js"
import * as Windowed from "../src/windowed.js"
import { prop } from "./support/prop.js"

const average: Limit.WindowSample = { _tag: "Average" }
const percentile = (p: number): Limit.WindowSample => ({ _tag: "Percentile", percentile: p, capacity: 10 })

const windowOf = (kind: Limit.WindowSample, samples: ReadonlyArray<readonly [number, boolean]>) =>
  samples.reduce((w, [rtt, dropped]) => Windowed.add(w, kind, rtt, 1, dropped), Windowed.empty())

/** Netflix's sample window tests use RTTs of 5,000, 500 and 10 (ns there; any unit here). */
const big = 5_000
const moderate = 500
const low = 10

describe("core/windowed: Netflix's WindowedLimit", () => {
  describe("sample windows (ImmutableAverageSampleWindowTest, ImmutablePercentileSampleWindowTest, ported)", () => {
    it("calculateAverage; droppedSampleShouldChangeTrackedAverage", () => {
      // Netflix divides whole nanoseconds (1836, 2627); milliseconds here keep the fraction
      expect(Windowed.tracked(windowOf(average, [[big, false], [moderate, false], [low, false]]), average))
        .toBeCloseTo((big + moderate + low) / 3)
      const dropped = windowOf(average, [[big, false], [moderate, false], [low, false], [big, true]])
      expect(Windowed.tracked(dropped, average)).toBe((big + moderate + low + big) / 4)
      expect(dropped.dropped).toBe(true)
    })

    it("calculateP50; droppedSampleShouldChangeTrackedRtt; p999ReturnsSlowestObservedRtt; order does not matter", () => {
      const p50 = percentile(0.5)
      expect(Windowed.tracked(windowOf(p50, [[big, false], [moderate, false], [low, false]]), p50)).toBe(moderate)
      expect(Windowed.tracked(windowOf(p50, [[low, false], [big, true], [big, true]]), p50)).toBe(big)
      const p999 = percentile(0.999)
      expect(Windowed.tracked(windowOf(p999, [[big, false], [moderate, false], [low, false]]), p999)).toBe(big)
      expect(Windowed.tracked(windowOf(p999, [[moderate, false], [low, false], [big, false], [low, false]]), p999))
        .toBe(big)
    })

    it("a percentile window ignores samples past its capacity, their drop included; a trimmed mean trims", () => {
      const full = windowOf(percentile(0.5), Array.from({ length: 10 }, () => [low, false] as const))
      const after = Windowed.add(full, percentile(0.5), big, 99, true)
      expect(after).toBe(full)
      // the lowest percentile is the fastest RTT, not out of range (Netflix would index -1)
      expect(Windowed.tracked(windowOf(percentile(0.01), [[moderate, false], [low, false]]), percentile(0.01)))
        .toBe(low)
      const trimmed: Limit.WindowSample = { _tag: "TrimmedMean", trim: 0.1 }
      const rtts = [0, ...Array.from({ length: 8 }, () => 2), 1_000]
      expect(Windowed.tracked(windowOf(trimmed, rtts.map((r) => [r, false] as const)), trimmed)).toBe(2)
    })

    it("a window never sees a sample added to another window that came from the same one", () => {
      const kind = percentile(0.999)
      const base = windowOf(kind, [[low, false], [low, false]])
      const a = Windowed.add(base, kind, moderate, 1, false)
      const b = Windowed.add(base, kind, big, 1, false)
      expect([Windowed.tracked(a, kind), Windowed.tracked(b, kind), Windowed.tracked(base, kind)]).toEqual([
        moderate,
        big,
        low
      ])
    })
  })

  describe("the window in front of a limit", () => {
    const bounds = { minLimit: 1, maxLimit: 1_000, initialLimit: 10 }
    const windowed = (
      algorithm: Limit.PerSample,
      options: Partial<Omit<Limit.Windowed, "_tag" | "algorithm">> = {}
    ): Limit.Config => ({ bounds, algorithm: { _tag: "Windowed", ...Limit.defaults.windowed, ...options, algorithm } })
    /** Calls of `rtt` ms, at `inflight`, one starting every `every` ms from `from`. */
    const calls = (n: number, rtt: number, options: { every: number; from?: number; inflight?: number }) =>
      Array.from({ length: n }, (_, i): Limit.Sample => ({
        rttMillis: rtt,
        inflight: options.inflight ?? 10,
        dropped: false,
        startMillis: (options.from ?? 0) + i * options.every
      }))
    const run = (config: Limit.Config, samples: ReadonlyArray<Limit.Sample>) =>
      samples.reduce((s, sample) => Limit.update(config, s, sample, 0.5), Limit.initial(config, 0.5))

    it("feeds its limit one sample per window: the mean RTT, the most in flight, whether any call dropped", () => {
      const seen: Array<Limit.Sample> = []
      const config = windowed(Limit.defaults.vegas)
      const spy = (c: Limit.Config, s: Limit.State, sample: Limit.Sample, random: number) => {
        seen.push(sample)
        return Limit.update(c, s, sample, random)
      }
      const w = config.algorithm as Limit.Windowed
      let state = Limit.initial(config, 0.5)
      // the first call closes the first window at 10 ms (one sample: too few, dropped); the next closes with the
      // first call that ends after 10 + 1,000 ms, itself included
      const samples = [
        ...calls(1, 10, { every: 0 }),
        ...calls(18, 20, { every: 50, from: 100, inflight: 3 }),
        { rttMillis: 40, inflight: 12, dropped: true, startMillis: 1_000 },
        ...calls(3, 20, { every: 50, from: 1_050 })
      ]
      for (const sample of samples) state = Windowed.update(bounds, w, state, sample, 0.5, spy)
      expect(seen).toEqual([{ rttMillis: (18 * 20 + 40) / 19, inflight: 12, dropped: true, startMillis: 1_000 }])
      expect(state.windowed?.nextUpdateMillis).toBe(1_040 + 1_000)
      expect(state.windowed?.window.count).toBe(3)
    })

    it("VegasLimit behind it: grows by beta per window of calls with no queue, shrinks on a window that queued", () => {
      const config = windowed(Limit.defaults.vegas)
      // windows close at 10 ms (1 call: dropped), 1,020 ms (21 calls) and 2,040 ms (21 calls)
      const warm = [...calls(1, 10, { every: 0 }), ...calls(21, 10, { every: 50, from: 10 })]
      const first = run(config, warm)
      // the second window's mean is the no-load RTT (Vegas's first sample); nothing moves yet
      expect([first.rttNoLoad, Limit.limitOf(config, first)]).toEqual([10, 10])
      const grown = run(config, [...warm, ...calls(21, 10, { every: 50, from: 1_030 })])
      expect(Limit.limitOf(config, grown)).toBe(16)
      // 10 × (1 − 10/50) = 8 queued > beta: − log10(limit)
      const queued = run(config, [...warm, ...calls(21, 50, { every: 50, from: 1_030 })])
      expect(Limit.limitOf(config, queued)).toBe(9)
    })

    it("a window of fewer than windowSize calls, or of calls faster than minRttThreshold, moves nothing", () => {
      const config = windowed(Limit.defaults.aimd)
      // 9 calls a second, every one a drop: AIMD would cut on each window that counts
      const sparse = Array.from({ length: 50 }, (_, i): Limit.Sample => ({
        rttMillis: 10,
        inflight: 10,
        dropped: true,
        startMillis: i * 112
      }))
      expect(Limit.limitOf(config, run(config, sparse))).toBe(10)
      const instant = sparse.map((s, i) => ({ ...s, rttMillis: 0.05, startMillis: i * 10 }))
      expect(run(config, instant).windowed).toBeUndefined()
      // the same drops ten a second: every window counts
      const dense = sparse.map((s, i) => ({ ...s, startMillis: i * 100 }))
      expect(Limit.limitOf(config, run(config, dense))).toBeLessThan(10)
    })

    it("a window lasts twice its lowest RTT, within [minWindowTime, maxWindowTime]", () => {
      const config = windowed(Limit.defaults.aimd, { minWindowMillis: 100, maxWindowMillis: 500 })
      const after = (rtt: number) => run(config, calls(1, rtt, { every: 0 })).windowed!.nextUpdateMillis
      expect([after(10), after(80), after(400)]).toEqual([10 + 100, 80 + 160, 400 + 500])
    })

    prop(
      "the limit behind it moves at most once per minWindowTime of the calls' end times",
      [
        fc.array(
          fc.record({
            gap: fc.double({ min: 0, max: 40, noNaN: true }),
            rtt: fc.double({ min: 0, max: 300, noNaN: true }),
            inflight: fc.nat(30),
            dropped: fc.boolean()
          }),
          { maxLength: 400 }
        ),
        fc.constantFrom<Limit.PerSample>(Limit.defaults.aimd, Limit.defaults.vegas, Limit.defaults.gradient2),
        fc.integer({ min: 100, max: 1_000 })
      ],
      ([samples, algorithm, minWindowMillis]) => {
        const config = windowed(algorithm, { minWindowMillis, maxWindowMillis: 1_000 })
        let state = Limit.initial(config, 0.5)
        let start = 0
        let lastChange = -Infinity
        for (const { dropped, gap, inflight, rtt } of samples) {
          start += gap
          const next = Limit.update(config, state, { rttMillis: rtt, inflight, dropped, startMillis: start }, 0.5)
          if (next.estimate !== state.estimate) {
            expect(start + rtt - lastChange).toBeGreaterThan(minWindowMillis)
            lastChange = start + rtt
          }
          state = next
        }
      }
    )
  })
})
