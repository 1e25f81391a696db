import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, FastCheck as fc, Random, Schedule, TestClock } from "effect"
import { Backoff } from "../src/index.js"

/** Steps a schedule `n` times and returns the delays (ms) it chose. */
const delays = (schedule: Schedule.Schedule<Duration.Duration>, n: number) =>
  Effect.gen(function*() {
    let state = schedule.initial
    const out: Array<number> = []
    for (let i = 0; i < n; i++) {
      const [next, delay] = yield* schedule.step(0, undefined, state)
      state = next
      out.push(Duration.toMillis(delay))
    }
    return out
  })

const options = { base: "100 millis", cap: "1 second" } as const

describe("Backoff", () => {
  it.effect("exponential doubles up to the cap and draws no randomness", () =>
    Effect.gen(function*() {
      // Random.fixed would cycle if drawn; a draw would change nothing, so count draws instead
      let draws = 0
      const counting = Random.make(1)
      const spy: Random.Random = { ...counting, next: Effect.sync(() => ++draws / 10) }
      const out = yield* delays(Backoff.exponential(options), 6).pipe(Effect.withRandom(spy))
      expect(out).toEqual([100, 200, 400, 800, 1000, 1000])
      expect(draws).toBe(0)
    }))

  it.effect("fullJitter is r * c(n), one draw per delay", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.fullJitter(options), 5).pipe(
        Effect.withRandom(Random.fixed([0.5, 0.25, 0.1, 0.9, 0]))
      )
      expect(out).toEqual([50, 50, 40, 720, 0])
    }))

  it.effect("equalJitter is c(n)/2 + r * c(n)/2", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.equalJitter(options), 5).pipe(
        Effect.withRandom(Random.fixed([0, 0.5, 1 - 2 ** -53, 0.25, 0.5]))
      )
      expect(out[0]).toBe(50)
      expect(out[1]).toBe(150)
      expect(out[2]).toBeCloseTo(400, 9)
      expect(out.slice(3)).toEqual([500, 750])
    }))

  it.effect("decorrelatedJitter follows min(cap, base + r * (3 * prev - base)) from prev = base", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.decorrelatedJitter(options), 5).pipe(
        Effect.withRandom(Random.fixed([0.5, 0.5, 1 - 2 ** -53, 0, 0.5]))
      )
      // s0 = 100 + .5*(300-100) = 200; s1 = 100 + .5*(600-100) = 350; s2 ~ min(1000, 100 + 950) = 1000
      // s3 = 100 + 0 = 100; s4 = 100 + .5*(300-100) = 200
      expect(out).toEqual([200, 350, 1000, 100, 200])
    }))

  it.effect("fractional delays are kept", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.fullJitter({ base: "3 millis", cap: "1 second" }), 1).pipe(
        Effect.withRandom(Random.fixed([0.5]))
      )
      expect(out).toEqual([1.5])
    }))

  it.effect("the schedule waits exactly its delay under Effect.retry", () =>
    Effect.gen(function*() {
      const instants: Array<number> = []
      const failing = Effect.flatMap(TestClock.currentTimeMillis, (now) => {
        instants.push(now)
        return Effect.fail("boom")
      })
      const fiber = yield* Effect.fork(Effect.retry(failing, { schedule: Backoff.exponential(options), times: 4 }))
      yield* TestClock.adjust("5 seconds")
      yield* Effect.exit(fiber.await)
      expect(instants).toEqual([0, 100, 300, 700, 1500])
    }))

  it.effect("huge attempt numbers stay at the cap (no overflow to NaN)", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.exponential({ base: "1 millis", cap: "2 seconds" }), 1100)
      expect(out.at(-1)).toBe(2000)
      expect(out.every(Number.isFinite)).toBe(true)
    }))

  describe("bounds (properties over random seeds)", () => {
    const arbitraryOptions = fc.record({
      base: fc.integer({ min: 1, max: 1000 }),
      extra: fc.integer({ min: 0, max: 100_000 }),
      seed: fc.integer()
    })

    // plain properties, run synchronously: the schedules need neither a clock nor a test environment
    // (it.effect.prop builds a fresh TestContext for every sample, most of these tests' time)
    const seeded = (schedule: Schedule.Schedule<Duration.Duration>, seed: number) =>
      Effect.runSync(delays(schedule, 40).pipe(Effect.withRandom(Random.make(seed))))

    it.prop("fullJitter delays are in [0, c(n))", [arbitraryOptions], ([o]) => {
      const cap = o.base + o.extra
      seeded(Backoff.fullJitter({ base: o.base, cap }), o.seed).forEach((d, n) => {
        expect(d).toBeGreaterThanOrEqual(0)
        expect(d).toBeLessThan(Math.min(cap, o.base * 2 ** n))
      })
    })

    it.prop("equalJitter delays are in [c(n)/2, c(n))", [arbitraryOptions], ([o]) => {
      const cap = o.base + o.extra
      seeded(Backoff.equalJitter({ base: o.base, cap }), o.seed).forEach((d, n) => {
        const c = Math.min(cap, o.base * 2 ** n)
        expect(d).toBeGreaterThanOrEqual(c / 2)
        expect(d).toBeLessThan(c)
      })
    })

    it.prop("decorrelatedJitter delays are in [base, cap]", [arbitraryOptions], ([o]) => {
      const cap = o.base + o.extra
      for (const d of seeded(Backoff.decorrelatedJitter({ base: o.base, cap }), o.seed)) {
        expect(d).toBeGreaterThanOrEqual(o.base)
        expect(d).toBeLessThanOrEqual(cap)
      }
    })
  })

  it.effect("means over a seeded Random match the formulas", () =>
    Effect.gen(function*() {
      const runs = 20_000
      const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length
      const firsts = (schedule: Schedule.Schedule<Duration.Duration>) =>
        Effect.forEach(Array.from({ length: runs }), () => Effect.map(delays(schedule, 1), (d) => d[0]!))
      const full = yield* firsts(Backoff.fullJitter({ base: 100, cap: 1000 }))
      const equal = yield* firsts(Backoff.equalJitter({ base: 100, cap: 1000 }))
      const decorrelated = yield* firsts(Backoff.decorrelatedJitter({ base: 100, cap: 1000 }))
      expect(mean(full)).toBeCloseTo(50, 0) // uniform [0, 100)
      expect(mean(equal)).toBeCloseTo(75, 0) // 50 + uniform [0, 50)
      expect(mean(decorrelated)).toBeCloseTo(200, 0) // uniform [100, 300)
    }).pipe(Effect.withRandom(Random.make("backoff-means"))))

  it("rejects bad options when built", () => {
    expect(() => Backoff.fullJitter({ base: -1, cap: 10 })).toThrow(/non-negative/)
    expect(() => Backoff.fullJitter({ base: NaN, cap: 10 })).toThrow(/non-negative/)
    expect(() => Backoff.equalJitter({ base: "-5 millis", cap: 10 })).toThrow(/non-negative/)
    expect(() => Backoff.exponential({ base: 100, cap: 10 })).toThrow(/cap .* must not be below base/)
    expect(() => Backoff.decorrelatedJitter({ base: 1, cap: Infinity })).toThrow(/finite/)
    expect(() => Backoff.exponential({ base: "soon" as any, cap: 10 })).toThrow(/not a duration/)
  })
})
