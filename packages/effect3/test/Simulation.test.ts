import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, FastCheck as fc, Random, type Schedule, ScheduleDecision, ScheduleIntervals } from "effect"
import {
  type Algorithm,
  algorithms,
  fastDriver,
  libraryOptions,
  postParameters,
  schedule,
  scheduleDriver
} from "../examples/simulate/backoff.js"
import { escapeXml, formatNumber, lineChart } from "../examples/simulate/chart.js"
import { header, toCsv } from "../examples/simulate/csv.js"
import * as Model from "../examples/simulate/model.js"
import { parseAlgorithms, parseClients } from "../examples/simulate/options.js"
import { Prng, toRandom, type Uniform } from "../examples/simulate/prng.js"
import { callsChart, sampleCounts, summary, timeChart } from "../examples/simulate/report.js"
import { runOnce, sweep, type SweepOptions } from "../examples/simulate/sweep.js"
import { Backoff } from "../src/index.js"

/** Uniform draws from a list, failing loudly when the model draws more than the test planned. */
const draws = (values: ReadonlyArray<number>): Uniform & { readonly used: () => number } => {
  let i = 0
  return {
    next: () => {
      if (i >= values.length) throw new Error(`drew more than the ${values.length} planned values`)
      return values[i++]!
    },
    used: () => i
  }
}

/** One run of the model with every hop taking exactly `hopMs` and backoff draws from `values`. */
const fixedRun = (algorithm: Algorithm, clients: number, values: ReadonlyArray<number> = [], hopMs = 10) => {
  const random = draws(values)
  const result = Model.run({ clients, hop: () => hopMs, delays: fastDriver(algorithm, clients, random) })
  return { ...result, draws: random.used() }
}

/**
 * Steps a schedule `n` times from `now = 0` and returns the waits it decides (ms). Its `Duration` output
 * is the same delay rounded to whole nanoseconds, so it is checked to within a nanosecond.
 */
const stepDelays = (s: Schedule.Schedule<Duration.Duration>, n: number) =>
  Effect.gen(function*() {
    let state = s.initial
    const out: Array<number> = []
    for (let i = 0; i < n; i++) {
      const [next, output, decision] = yield* s.step(0, undefined, state)
      state = next
      if (!ScheduleDecision.isContinue(decision)) throw new Error("the schedule stopped")
      const wait = ScheduleIntervals.start(decision.intervals)
      expect(Math.abs(Duration.toMillis(output) - wait)).toBeLessThanOrEqual(0.5e-6)
      out.push(wait)
    }
    return out
  })

/**
 * The post's formulas, verbatim (attempt counted from 1; Python's `random.uniform(a, b)` is
 * `a + (b - a) * r`), with base 5 and cap 2000.
 */
const postDelays = (algorithm: Exclude<Algorithm, "none">, rs: ReadonlyArray<number>): ReadonlyArray<number> => {
  const { base, cap } = postParameters
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
      case "equal": {
        const v = expo(attempt)
        return v / 2 + uniform(0, v / 2, r)
      }
      case "decorrelated":
        sleep = Math.min(cap, uniform(base, sleep * 3, r))
        return sleep
    }
  })
}

const small: SweepOptions = { clients: [1, 5, 20], algorithms, runs: 4, seed: "test" }

describe("Simulation", () => {
  describe("model", () => {
    it("one client never fails: one read, one write, done after four hops", () => {
      for (const algorithm of algorithms) {
        expect(fixedRun(algorithm, 1)).toEqual({ writes: 1, reads: 1, completionMs: 40, draws: 0 })
      }
      // with random hops the completion time is exactly the sum of the four hops drawn
      const hops = [7, 12.5, 9, 11.25]
      let i = 0
      const result = Model.run({ clients: 1, hop: () => hops[i++]!, delays: { next: () => 0 } })
      expect(result).toEqual({ writes: 1, reads: 1, completionMs: 7 + 12.5 + 9 + 11.25 })
      for (const seed of [1, 2, 3]) {
        for (const algorithm of algorithms) expect(runOnce(algorithm, 1, seed).writes).toBe(1)
      }
    })

    // Every hop 10 ms. Both reads reach the server at 10 and see version 0; both writes arrive at 30:
    // client 0's (sent first) succeeds and bumps the version, client 1's fails. Client 1 gets its reply
    // at 40, sleeps its first backoff b, and its read reaches the server at 50 + b; the write then
    // succeeds and its reply arrives 30 ms later: completion 80 + b, three writes.
    it.each(
      [
        ["none", [], 0],
        ["exponential", [], 10], // min(2000, 5 * 2^1)
        ["full", [0.5], 5], // 0.5 * 10
        ["equal", [0.5], 7.5], // 10/2 + 0.5 * 10/2
        ["decorrelated", [0.5], 10] // 5 + 0.5 * (3 * 5 - 5)
      ] as const
    )("two clients collide exactly as predicted: %s", (algorithm, values, backoff) => {
      expect(fixedRun(algorithm, 2, values)).toEqual({
        writes: 3,
        reads: 3,
        completionMs: 80 + backoff,
        draws: values.length
      })
    })

    // Three clients, hops 10 ms: clients 1 and 2 both fail at 30 (replies at 40).
    // - no jitter: both back off the same time, collide again, and client 2 needs a third attempt.
    // - jitter with draws (0.5 for client 1, 0.1 for client 2): client 2 reads first, so client 1's write
    //   carries a stale version and fails once more, then backs off with its third draw (0.25).
    it.each(
      [
        ["none", [], 120], // reads at 50, writes at 70; client 2 reads at 90, writes at 110, reply 120
        ["exponential", [], 150], // reads at 60, writes at 80; client 2 backs off 20: read 120, reply 150
        ["full", [0.5, 0.1, 0.25], 130], // reads 55 and 51; client 1 fails at 75, backs off 0.25*20 = 5
        ["equal", [0.5, 0.1, 0.25], 140], // reads 57.5 and 55.5; fails at 77.5, backs off 10 + 2.5
        ["decorrelated", [0.5, 0.1, 0.25], 141.25] // reads 60 and 56; fails at 80, backs off 5 + 0.25 * 25
      ] as const
    )("three clients retry as predicted: %s", (algorithm, values, completionMs) => {
      expect(fixedRun(algorithm, 3, values)).toEqual({ writes: 6, reads: 6, completionMs, draws: values.length })
    })

    it("every client writes successfully exactly once, whatever the contention", () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 40 }),
          fc.constantFrom(...algorithms),
          fc.integer(),
          (clients, algorithm, seed) => {
            const result = runOnce(algorithm, clients, seed)
            // each failed write is followed by one more read; the last write of each client succeeds
            expect(result.writes).toBe(result.reads)
            expect(result.writes).toBeGreaterThanOrEqual(clients)
            expect(result.completionMs).toBeGreaterThan(0)
          }
        ),
        { numRuns: 60 }
      )
    })

    it("reproduces the post's ordering: jitter does far less work than none or plain exponential", () => {
      const rows = sweep({ clients: [60], algorithms, runs: 20, seed: "ordering" })
      const calls = Object.fromEntries(rows.map((r) => [r.algorithm, r.calls]))
      expect(calls.full!).toBeLessThan(calls.exponential! * 0.75)
      expect(calls.decorrelated!).toBeLessThan(calls.exponential! * 0.75)
      expect(calls.exponential!).toBeLessThan(calls.none!)
      const time = Object.fromEntries(rows.map((r) => [r.algorithm, r.timeMs]))
      expect(time.exponential!).toBeGreaterThan(5 * time.full!)
    })
  })

  describe("parameter mapping", () => {
    it("maps the post's base 5 ms to the library's base 10 ms (exponent 1 first) and keeps 5 ms for decorrelated", () => {
      expect(libraryOptions("exponential")).toEqual({ base: 10, cap: 2000 })
      expect(libraryOptions("full")).toEqual({ base: 10, cap: 2000 })
      expect(libraryOptions("equal")).toEqual({ base: 10, cap: 2000 })
      expect(libraryOptions("decorrelated")).toEqual({ base: 5, cap: 2000 })
      expect(schedule("none")).toBeUndefined()
    })

    // draws as the simulation's generator makes them: k / 2^32
    const unit = fc.integer({ min: 0, max: 2 ** 32 - 1 }).map((k) => k / 2 ** 32)

    it.effect.prop(
      "the library schedules give the post's delays for the same draws",
      [unit, fc.array(unit, { maxLength: 15 })],
      ([first, rest]) =>
        Effect.gen(function*() {
          const rs: [number, ...Array<number>] = [first, ...rest]
          for (const algorithm of ["exponential", "full", "equal", "decorrelated"] as const) {
            const out = yield* stepDelays(schedule(algorithm)!, rs.length).pipe(Effect.withRandom(Random.fixed(rs)))
            expect(out).toEqual(postDelays(algorithm, rs))
          }
        }),
      { fastCheck: { numRuns: 40 } }
    )

    it.effect("the first delays, worked by hand", () =>
      Effect.gen(function*() {
        const rs: [number, ...Array<number>] = [0.5, 0.5, 0.5, 0.5]
        const run = (s: Schedule.Schedule<Duration.Duration>) =>
          stepDelays(s, 4).pipe(Effect.withRandom(Random.fixed(rs)))
        expect(yield* run(schedule("exponential")!)).toEqual([10, 20, 40, 80])
        expect(yield* run(schedule("full")!)).toEqual([5, 10, 20, 40])
        expect(yield* run(schedule("equal")!)).toEqual([7.5, 15, 30, 60])
        // 5 + .5 * (15 - 5) = 10; 5 + .5 * (30 - 5) = 17.5; 5 + .5 * 47.5 = 28.75; 5 + .5 * 81.25 = 45.625
        expect(yield* run(schedule("decorrelated")!)).toEqual([10, 17.5, 28.75, 45.625])
        // the cap holds from attempt 9 on: 5 * 2^9 = 2560 > 2000
        const expo = yield* stepDelays(Backoff.exponential(libraryOptions("exponential")), 10)
        expect(expo.slice(7)).toEqual([1280, 2000, 2000])
      }))

    it.prop(
      "the synchronous driver gives the schedules' delays, draw for draw",
      [fc.constantFrom(...algorithms), fc.integer(), fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 40 })],
      ([algorithm, seed, clientOrder]) => {
        const fastPrng = new Prng(seed)
        const exactPrng = new Prng(seed)
        const fast = fastDriver(algorithm, 5, fastPrng)
        const exact = scheduleDriver(algorithm, 5, exactPrng)
        for (const client of clientOrder) expect(fast.next(client)).toBe(exact.next(client))
        // both consumed the same number of draws
        expect(fastPrng.next()).toBe(exactPrng.next())
      }
    )

    it("a whole sweep is identical with the library schedules stepped through Effect", () => {
      const options: SweepOptions = { clients: [2, 8, 15], algorithms, runs: 3, seed: "drivers" }
      expect(toCsv(sweep({ ...options, driver: scheduleDriver }))).toBe(toCsv(sweep(options)))
    })
  })

  describe("determinism", () => {
    it("the same seed gives the same CSV, another seed another one", () => {
      const csv = toCsv(sweep(small))
      expect(toCsv(sweep(small))).toBe(csv)
      expect(toCsv(sweep({ ...small, seed: "other" }))).not.toBe(csv)
    })

    it("a cell does not depend on the rest of the sweep", () => {
      const all = sweep(small)
      const one = sweep({ ...small, clients: [20], algorithms: ["decorrelated"] })
      expect(one).toEqual(all.filter((r) => r.clients === 20 && r.algorithm === "decorrelated"))
    })

    it("the generator is uniform in [0, 1) and its normals have the right mean and spread", () => {
      const prng = new Prng(42)
      const n = 20_000
      let sum = 0
      let sumSq = 0
      let outside = 0
      for (let i = 0; i < n; i++) {
        const u = prng.next()
        if (!(u >= 0 && u < 1)) outside++
        const z = prng.normal()
        sum += z
        sumSq += z * z
      }
      expect(outside).toBe(0)
      expect(Math.abs(sum / n)).toBeLessThan(0.03)
      expect(Math.abs(sumSq / n - 1)).toBeLessThan(0.05)
    })

    it.effect("the generator serves as Effect's Random, one draw per Random.next", () =>
      Effect.gen(function*() {
        const a = new Prng(7)
        const b = new Prng(7)
        const fromEffect = yield* Effect.all([Random.next, Random.next, Random.next]).pipe(
          Effect.withRandom(toRandom(a))
        )
        expect(fromEffect).toEqual([b.next(), b.next(), b.next()])
      }))
  })

  describe("output", () => {
    const rows = sweep(small)

    it("the CSV has the header, one row per cell and numeric columns", () => {
      const lines = toCsv(rows).trimEnd().split("\n")
      expect(lines[0]).toBe("clients,algorithm,time_ms,calls")
      expect(lines[0]).toBe(header)
      expect(lines).toHaveLength(1 + small.clients.length * algorithms.length)
      for (const line of lines.slice(1)) {
        const [clients, algorithm, time, calls, ...rest] = line.split(",")
        expect(rest).toEqual([])
        expect(Number.isInteger(Number(clients))).toBe(true)
        expect(algorithms).toContain(algorithm)
        expect(Number.isFinite(Number(time)) && Number(time) > 0).toBe(true)
        expect(Number(calls)).toBeGreaterThanOrEqual(Number(clients))
      }
      expect(lines.slice(1).map((l) => l.split(",").slice(0, 2).join(","))).toEqual(
        small.clients.flatMap((c) => algorithms.map((a) => `${c},${a}`))
      )
    })

    /** A minimal XML check: one root, every tag closed in order, attributes quoted, no stray `&`. */
    const assertWellFormed = (svg: string) => {
      expect(svg.startsWith("<svg ")).toBe(true)
      expect(svg.trimEnd().endsWith("</svg>")).toBe(true)
      const stack: Array<string> = []
      let roots = 0
      const tag = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g
      let last = 0
      for (let m = tag.exec(svg); m !== null; m = tag.exec(svg)) {
        expect(svg.slice(last, m.index)).not.toMatch(/[<>]|&(?!(amp|lt|gt|quot|apos|#\d+);)/)
        last = tag.lastIndex
        const [, closing, name, , selfClosing] = m
        if (stack.length === 0 && closing === "") roots++
        if (closing === "/") expect(stack.pop()).toBe(name)
        else if (selfClosing !== "/") stack.push(name!)
      }
      expect(svg.slice(last).trim()).toBe("")
      expect(stack).toEqual([])
      expect(roots).toBe(1)
    }

    it("the charts are well-formed SVG with a line and a legend entry per algorithm", () => {
      for (const svg of [callsChart(rows, small), timeChart(rows, small)]) {
        assertWellFormed(svg)
        expect(svg.match(/<polyline /g)).toHaveLength(algorithms.length)
        for (const label of ["no backoff", "exponential, no jitter", "full jitter", "equal jitter"]) {
          expect(svg).toContain(`>${label}</text>`)
        }
        expect(svg).toContain("contending clients")
        // every polyline has one point per client count
        for (const m of svg.matchAll(/points="([^"]*)"/g)) expect(m[1]!.split(" ")).toHaveLength(small.clients.length)
      }
    })

    it("escapes text and formats tick labels", () => {
      const svg = lineChart({
        title: "a < b & c",
        xLabel: "x",
        yLabel: "y",
        series: [{ label: "\"quoted\"", color: "#000", points: [[1, 1], [2, 3]] }]
      })
      assertWellFormed(svg)
      expect(svg).toContain("a &lt; b &amp; c")
      expect(escapeXml("\"")).toBe("&quot;")
      expect(formatNumber(1234567.5)).toBe("1,234,567.5")
      expect(formatNumber(0.2)).toBe("0.2")
    })

    it("the summary has a line per algorithm at a few client counts", () => {
      const text = summary(rows)
      expect(text).toContain("20 clients")
      expect(text.split("\n").filter((l) => l.startsWith("decorrelated jitter"))).toHaveLength(2)
      expect(sampleCounts([10, 20, 30, 40, 50, 60, 70, 80, 90, 100])).toEqual([10, 40, 70, 100])
    })
  })

  describe("command-line values", () => {
    it("parses client counts: ranges with a step, lists, both", () => {
      expect(parseClients("10..190:10")).toEqual(Array.from({ length: 19 }, (_, i) => 10 * (i + 1)))
      expect(parseClients("1,5,10..30:10")).toEqual([1, 5, 10, 20, 30])
      expect(parseClients("3..5")).toEqual([3, 4, 5])
      expect(parseClients("50, 10")).toEqual([10, 50])
      expect(() => parseClients("0")).toThrow(/positive integer/)
      expect(() => parseClients("10..5")).toThrow(/empty range/)
      expect(() => parseClients("ten")).toThrow(/positive integer/)
    })

    it("parses algorithms in the canonical order", () => {
      expect(parseAlgorithms("all")).toEqual(algorithms)
      expect(parseAlgorithms("decorrelated,full")).toEqual(["full", "decorrelated"])
      expect(() => parseAlgorithms("fast")).toThrow(/unknown "fast"/)
    })
  })
})
