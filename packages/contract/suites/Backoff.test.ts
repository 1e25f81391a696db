import { fc, fork, prop, scheduleOutputs, TestClock, withRandom, withRandomDraw, withSeed } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Schedule } from "effect"
import { Backoff } from "effect-resilience"

/** Runs a schedule `n` steps (one run of it) and returns the delays (ms) it chose. */
const delays = (schedule: Schedule.Schedule<Duration.Duration>, n: number) =>
  Effect.map(scheduleOutputs(schedule, n), (out) => out.map(Duration.toMillis))

const options = { base: "100 millis", cap: "1 second" } as const

describe("Backoff", () => {
  it.effect("exponential doubles up to the cap and draws no randomness", () =>
    Effect.gen(function*() {
      // a draw would change nothing here, so count draws instead
      let draws = 0
      const out = yield* delays(Backoff.exponential(options), 6).pipe(withRandomDraw(() => ++draws / 10))
      expect(out).toEqual([100, 200, 400, 800, 1000, 1000])
      expect(draws).toBe(0)
    }))

  it.effect("fullJitter is r * c(n), one draw per delay", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.fullJitter(options), 5).pipe(withRandom([0.5, 0.25, 0.1, 0.9, 0]))
      expect(out).toEqual([50, 50, 40, 720, 0])
    }))

  it.effect("equalJitter is c(n)/2 + r * c(n)/2", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.equalJitter(options), 5).pipe(
        withRandom([0, 0.5, 1 - 2 ** -53, 0.25, 0.5])
      )
      expect(out[0]).toBe(50)
      expect(out[1]).toBe(150)
      expect(out[2]).toBeCloseTo(400, 9)
      expect(out.slice(3)).toEqual([500, 750])
    }))

  it.effect("decorrelatedJitter follows min(cap, base + r * (3 * prev - base)) from prev = base", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.decorrelatedJitter(options), 5).pipe(
        withRandom([0.5, 0.5, 1 - 2 ** -53, 0, 0.5])
      )
      // s0 = 100 + .5*(300-100) = 200; s1 = 100 + .5*(600-100) = 350; s2 ~ min(1000, 100 + 950) = 1000
      // s3 = 100 + 0 = 100; s4 = 100 + .5*(300-100) = 200
      expect(out).toEqual([200, 350, 1000, 100, 200])
    }))

  it.effect("fractional delays are kept", () =>
    Effect.gen(function*() {
      const out = yield* delays(Backoff.fullJitter({ base: "3 millis", cap: "1 second" }), 1).pipe(
        withRandom([0.5])
      )
      expect(out).toEqual([1.5])
    }))

  it.effect("the schedule waits exactly its delay under Effect.retry", () =>
    Effect.gen(function*() {
      const instants: Array<number> = []
      const failing = Effect.flatMap(Clock.currentTimeMillis, (now) => {
        instants.push(now)
        return Effect.fail("boom")
      })
      const fiber = yield* fork(Effect.retry(failing, { schedule: Backoff.exponential(options), times: 4 }))
      yield* TestClock.adjust("5 seconds")
      yield* Fiber.await(fiber)
      expect(instants).toEqual([0, 100, 300, 700, 1500])
    }))

  it.effect("each run of a schedule starts over", () =>
    Effect.gen(function*() {
      const schedule = Backoff.exponential(options)
      expect(yield* delays(schedule, 3)).toEqual([100, 200, 400])
      expect(yield* delays(schedule, 3)).toEqual([100, 200, 400])
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
    const seeded = (schedule: Schedule.Schedule<Duration.Duration>, seed: number) =>
      Effect.runSync(delays(schedule, 40).pipe(withSeed(seed)))

    it("fullJitter delays are in [0, c(n))", () => {
      fc.assert(fc.property(arbitraryOptions, (o) => {
        const cap = o.base + o.extra
        seeded(Backoff.fullJitter({ base: o.base, cap }), o.seed).forEach((d, n) => {
          expect(d).toBeGreaterThanOrEqual(0)
          expect(d).toBeLessThan(Math.min(cap, o.base * 2 ** n))
        })
      }))
    })

    it("equalJitter delays are in [c(n)/2, c(n))", () => {
      fc.assert(fc.property(arbitraryOptions, (o) => {
        const cap = o.base + o.extra
        seeded(Backoff.equalJitter({ base: o.base, cap }), o.seed).forEach((d, n) => {
          const c = Math.min(cap, o.base * 2 ** n)
          expect(d).toBeGreaterThanOrEqual(c / 2)
          expect(d).toBeLessThan(c)
        })
      }))
    })

    it("decorrelatedJitter delays are in [base, cap]", () => {
      fc.assert(fc.property(arbitraryOptions, (o) => {
        const cap = o.base + o.extra
        for (const d of seeded(Backoff.decorrelatedJitter({ base: o.base, cap }), o.seed)) {
          expect(d).toBeGreaterThanOrEqual(o.base)
          expect(d).toBeLessThanOrEqual(cap)
        }
      }))
    })
  })

  describe("the formulas of AWS's \"Exponential Backoff And Jitter\", draw for draw", () => {
    // the post's parameters (base 5 ms, cap 2 s, attempt counted from 1), its formulas verbatim (Python's
    // random.uniform(a, b) is a + (b - a) * r); the library counts the exponent from 0, so its base is the post's
    // first delay, 10 ms (decorrelated jitter keeps 5 ms: its base is the floor)
    const base = 5
    const cap = 2000
    const post = (algorithm: "exponential" | "full" | "equal" | "decorrelated", rs: ReadonlyArray<number>) => {
      const expo = (attempt: number) => Math.min(cap, 2 ** attempt * base)
      const uniform = (a: number, b: number, r: number) => a + (b - a) * r
      let sleep = base
      return rs.map((r, i) => {
        const attempt = i + 1
        switch (algorithm) {
          case "exponential":
            return expo(attempt)
          case "full":
            return uniform(0, expo(attempt), r)
          case "equal":
            return expo(attempt) / 2 + uniform(0, expo(attempt) / 2, r)
          case "decorrelated":
            sleep = Math.min(cap, uniform(base, sleep * 3, r))
            return sleep
        }
      })
    }
    const library = {
      exponential: Backoff.exponential({ base: 2 * base, cap }),
      full: Backoff.fullJitter({ base: 2 * base, cap }),
      equal: Backoff.equalJitter({ base: 2 * base, cap }),
      decorrelated: Backoff.decorrelatedJitter({ base, cap })
    } as const
    // draws as a 32-bit generator makes them: k / 2^32
    const unit = fc.integer({ min: 0, max: 2 ** 32 - 1 }).map((k) => k / 2 ** 32)

    prop(
      "every schedule gives the post's delays for the same draws",
      [fc.array(unit, { minLength: 1, maxLength: 15 })],
      ([rs]) => {
        for (const algorithm of ["exponential", "full", "equal", "decorrelated"] as const) {
          const out = Effect.runSync(delays(library[algorithm], rs.length).pipe(withRandom(rs)))
          const expected = post(algorithm, rs)
          out.forEach((d, i) => expect(d).toBeCloseTo(expected[i]!, 6)) // to the nanosecond
        }
      },
      { fastCheck: { numRuns: 40 } }
    )

    it.effect("the first delays, worked by hand", () =>
      Effect.gen(function*() {
        const run = (s: Schedule.Schedule<Duration.Duration>) => delays(s, 4).pipe(withRandom([0.5]))
        expect(yield* run(library.exponential)).toEqual([10, 20, 40, 80])
        expect(yield* run(library.full)).toEqual([5, 10, 20, 40])
        expect(yield* run(library.equal)).toEqual([7.5, 15, 30, 60])
        // 5 + .5 * (15 - 5) = 10; 5 + .5 * (30 - 5) = 17.5; 5 + .5 * 47.5 = 28.75; 5 + .5 * 81.25 = 45.625
        expect(yield* run(library.decorrelated)).toEqual([10, 17.5, 28.75, 45.625])
        // the cap holds from attempt 9 on: 5 * 2^9 = 2560 > 2000
        expect((yield* delays(library.exponential, 10)).slice(7)).toEqual([1280, 2000, 2000])
      }))
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
    }).pipe(withSeed("backoff-means")))

  it("rejects bad options when built", () => {
    expect(() => Backoff.fullJitter({ base: -1, cap: 10 })).toThrow(/non-negative/)
    expect(() => Backoff.fullJitter({ base: NaN, cap: 10 })).toThrow(/non-negative/)
    expect(() => Backoff.equalJitter({ base: "-5 millis", cap: 10 })).toThrow(/non-negative/)
    expect(() => Backoff.exponential({ base: 100, cap: 10 })).toThrow(/cap .* must not be below base/)
    expect(() => Backoff.decorrelatedJitter({ base: 1, cap: Infinity })).toThrow(/finite/)
    expect(() => Backoff.exponential({ base: "soon" as any, cap: 10 })).toThrow(/not a duration/)
  })
})
