import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { capacityOf, defaultScenario, Resource, type Scenario } from "../../../examples/storm/model.js"
import { checks, toCsv, toJson } from "../../../examples/storm/report.js"
import { Simulator } from "../examples/storm/engine.js"
import { runCell } from "../examples/storm/sweep.js"

/** The default world, shortened: 3 s at full capacity, 6 s at 30 %, 5 s after. */
const small: Scenario = { ...defaultScenario, durationMs: 14_000, triggerStartMs: 3_000, triggerEndMs: 9_000 }
const seed = 7

describe("storm engine", () => {
  it("moves the clock only when no fiber can run, timers at one instant in the order they were set", () => {
    const sim = new Simulator()
    const seen: Array<string> = []
    const exit = sim.run(
      Effect.gen(function*() {
        yield* Effect.forkDaemon(
          Effect.sleep(Duration.millis(50)).pipe(Effect.andThen(() => seen.push(`b@${sim.now}`)))
        )
        yield* Effect.forkDaemon(
          Effect.sleep(Duration.millis(50)).pipe(Effect.andThen(() => seen.push(`c@${sim.now}`)))
        )
        yield* Effect.sleep(Duration.millis(10))
        seen.push(`a@${sim.now}`)
        yield* Effect.sleep(Duration.millis(100))
        return sim.now
      }),
      1_000
    )
    expect(exit?._tag === "Success" && exit.value).toBe(110)
    expect(seen).toEqual(["a@10", "b@50", "c@50"])
  })

  it("stops at the time limit and does not fire a cancelled timer", () => {
    const sim = new Simulator()
    let fired = false
    const timer = sim.at(20, () => {
      fired = true
    })
    timer.fire = undefined
    expect(sim.run(Effect.sleep(Duration.days(1)), 5_000)).toBeUndefined()
    expect(fired).toBe(false)
  })

  it("the resource serves first in first out, keeps serving abandoned requests, and loses 70 % of its workers in the trigger", () => {
    const sim = new Simulator()
    const scenario: Scenario = {
      ...defaultScenario,
      concurrency: 10,
      serviceMs: 100,
      triggerStartMs: 1_000,
      triggerEndMs: 2_000
    }
    const resource = new Resource(sim, scenario)
    const done: Array<number> = []
    sim.at(0, () => {
      for (let i = 0; i < 12; i++) resource.submit(() => done.push(sim.now))
    })
    // 25 requests at 1 s, while only 3 workers are left
    sim.at(1_000, () => {
      const first = resource.submit(() => done.push(-1))
      first.done = undefined
      for (let i = 0; i < 24; i++) resource.submit(() => done.push(sim.now))
    })
    sim.run(Effect.sleep(Duration.days(1)), 10_000)
    expect(done.slice(0, 12)).toEqual([...Array(10).fill(100), 200, 200])
    expect(done).not.toContain(-1)
    // 3 workers from 1 s: the abandoned request takes one of the first 3 slots
    expect(done.slice(12, 14)).toEqual([1_100, 1_100])
    expect(resource.served).toBe(37)
  })
})

describe("storm", () => {
  it("the same seed gives the same rows and timelines", () => {
    const a = runCell(small, "full", 2, seed)
    const b = runCell(small, "full", 2, seed)
    expect(b).toEqual(a)
    expect(runCell(small, "naive", 1, seed)).toEqual(runCell(small, "naive", 1, seed))
  })

  it("full keeps more goodput than naive at 2×, with fewer attempts per request", () => {
    const naive = runCell(small, "naive", 2, seed).row
    const full = runCell(small, "full", 2, seed).row
    expect(full.goodput).toBeGreaterThan(naive.goodput)
    expect(naive.amplification).toBeGreaterThan(2)
    expect(full.amplification).toBeLessThan(naive.amplification)
    expect(full.amplification).toBeLessThanOrEqual(1.1)
  })

  it("naive stays collapsed after the trigger while full comes back", () => {
    const capacity = capacityOf(small)
    const end = small.triggerEndMs / small.bucketMs
    const naive = runCell(small, "naive", 1.5, seed)
    const full = runCell(small, "full", 1.5, seed)
    expect(Math.max(...naive.timeline.slice(end))).toBeLessThan(0.5 * capacity)
    expect(naive.row.recoverySeconds).toBeNull()
    expect(full.row.recoverySeconds).not.toBeNull()
    expect(full.row.recoverySeconds!).toBeLessThanOrEqual(5)
  })

  it("writes the JSON line the issue asks for, the CSV and the checks", () => {
    const cells = [runCell(small, "naive", 1.5, seed), runCell(small, "full", 1.5, seed)]
    const rows = cells.map((c) => c.row)
    const parsed = JSON.parse(toJson(small, rows)) as {
      capacity: unknown
      rows: ReadonlyArray<Record<string, unknown>>
    }
    expect(parsed.capacity).toBe(capacityOf(small))
    expect(parsed.rows).toHaveLength(2)
    for (const row of parsed.rows) {
      expect(Object.keys(row).sort()).toEqual(
        ["amplification", "goodput", "offered", "p99Ms", "policy", "recoverySeconds"]
      )
      expect(typeof row.offered).toBe("number")
      expect(typeof row.goodput).toBe("number")
      expect(typeof row.amplification).toBe("number")
      expect(row.p99Ms === null || typeof row.p99Ms === "number").toBe(true)
      expect(row.recoverySeconds === null || typeof row.recoverySeconds === "number").toBe(true)
    }
    expect(parsed.rows[0]!.offered).toBe(1.5 * capacityOf(small))
    const csv = toCsv(rows).trim().split("\n")
    expect(csv[0]).toBe("policy,offered,goodput,amplification,p99Ms,recoverySeconds")
    expect(csv[1]!.startsWith("naive,37.50,")).toBe(true)
    expect(csv[1]!.endsWith(",")).toBe(true) // naive never recovers: an empty recoverySeconds
    expect(checks(small, cells).some((line) => line.startsWith("ok   naive at 1.5×"))).toBe(true)
  })
})
