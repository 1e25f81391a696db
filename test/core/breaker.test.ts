import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Breaker from "../../src/core/breaker.js"

const opened = (m: Breaker.Machine, now: number, delay: number) => Breaker.open(m, now, delay)

describe("core/breaker", () => {
  it("a closed machine admits closed calls of its generation and allocates nothing for them", () => {
    const { admission, machine } = Breaker.admit(Breaker.initial, 0, 1)
    expect(admission).toEqual({ _tag: "Closed", generation: 0 })
    expect(machine).toBe(Breaker.initial)
    expect(Breaker.closedCounts(machine, 0, "failure")).toBe(true)
    expect(Breaker.closedCounts(machine, 0, "ignored")).toBe(false)
  })

  it("open rejects until openUntil, then half-open lets `permits` trials through", () => {
    const m = opened(Breaker.initial, 1000, 500)
    expect(m).toMatchObject({ state: "open", openUntil: 1500, openings: 1, generation: 1 })
    expect(Breaker.admit(m, 1200, 2).admission).toEqual({ _tag: "Rejected", retryAfterMillis: 300 })
    const a = Breaker.admit(m, 1500, 2)
    expect(a.admission).toEqual({ _tag: "Trial", generation: 2 })
    const b = Breaker.admit(a.machine, 1500, 2)
    expect(b.admission._tag).toBe("Trial")
    const c = Breaker.admit(b.machine, 1500, 2)
    expect(c.admission).toEqual({ _tag: "Rejected", retryAfterMillis: 0 })
    expect(c.machine).toMatchObject({ state: "half-open", admitted: 2, inFlight: 2 })
  })

  it("every trial succeeding closes; one failing (or slow) opens", () => {
    const half = Breaker.admit(opened(Breaker.initial, 0, 10), 10, 2)
    const two = Breaker.admit(half.machine, 10, 2).machine
    const first = Breaker.trialEnded(two, 2, "success", false, 2)
    expect(first.verdict).toBe("none")
    expect(Breaker.trialEnded(first.machine, 2, "success", false, 2).verdict).toBe("close")
    expect(Breaker.trialEnded(first.machine, 2, "failure", false, 2).verdict).toBe("open")
    expect(Breaker.trialEnded(first.machine, 2, "success", true, 2).verdict).toBe("open")
    const closed = Breaker.close(Breaker.trialEnded(first.machine, 2, "success", false, 2).machine)
    expect(closed).toMatchObject({ state: "closed", openings: 0, admitted: 0, succeeded: 0, inFlight: 0 })
  })

  it("an interrupted trial gives its permit back; a stale trial only leaves the in-flight count", () => {
    const t = Breaker.admit(opened(Breaker.initial, 0, 10), 10, 1)
    const back = Breaker.trialEnded(t.machine, 2, "ignored", false, 1)
    expect(back.machine).toMatchObject({ admitted: 0, inFlight: 0 })
    const reopened = opened(t.machine, 11, 10)
    const stale = Breaker.trialEnded(reopened, 2, "success", false, 1)
    expect(stale).toEqual({ machine: { ...reopened, inFlight: 0 }, verdict: "none" })
  })

  it("a trial still running from an earlier period holds its permit", () => {
    const t = Breaker.admit(opened(Breaker.initial, 0, 10), 10, 1).machine
    const again = opened(t, 10, 10) // another trial failed meanwhile, in this toy history
    expect(Breaker.admit(again, 20, 1).admission).toEqual({ _tag: "Rejected", retryAfterMillis: 0 })
  })

  it("isolate holds open until reset; the time-up refresh does not half-open it", () => {
    const m = Breaker.isolate(Breaker.initial)
    expect(m).toMatchObject({ state: "open", isolated: true, generation: 1 })
    expect(Breaker.refresh(m, Number.MAX_SAFE_INTEGER)).toBe(m)
    expect(Breaker.retryAfterMillis(m, 0)).toBe(Infinity)
    expect(Breaker.isolate(m)).toBe(m)
    expect(Breaker.reset(m)).toMatchObject({ state: "closed", isolated: false, generation: 2 })
  })

  it("save and restore: open stays open until openUntil, half-open restores with no trial running", () => {
    const m = opened(Breaker.initial, 0, 100)
    expect(Breaker.save(m)).toEqual({ state: "open", isolated: false, openUntil: 100, openings: 1 })
    expect(Breaker.restore(Breaker.save(m))).toMatchObject({ state: "open", openUntil: 100, openings: 1 })
    expect(Breaker.restore({ state: "half-open", isolated: false, openUntil: null, openings: 3 })).toMatchObject({
      state: "half-open",
      admitted: 0,
      inFlight: 0,
      openings: 3
    })
  })

  // a random history: time passes, calls are admitted and end in any order, the breaker is isolated and reset
  const op = fc.oneof(
    fc.record({ _tag: fc.constant("tick" as const), millis: fc.integer({ min: 0, max: 50 }) }),
    fc.record({ _tag: fc.constant("call" as const) }),
    fc.record({
      _tag: fc.constant("end" as const),
      which: fc.nat(),
      outcome: fc.constantFrom<Array<Breaker.Outcome>>("success", "failure", "ignored"),
      slow: fc.boolean()
    }),
    fc.record({ _tag: fc.constantFrom("isolate" as const, "reset" as const) })
  )

  it.prop(
    "never more than `permits` trials run at once, and the counters stay consistent",
    [fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 200 })],
    ([permits, ops]) => {
      let m = Breaker.initial
      let now = 0
      let consecutive = 0
      const running: Array<{ readonly trial: boolean; readonly generation: number }> = []
      for (const o of ops) {
        switch (o._tag) {
          case "tick":
            now += o.millis
            break
          case "call": {
            const a = Breaker.admit(m, now, permits)
            m = a.machine
            if (a.admission._tag !== "Rejected") {
              running.push({ trial: a.admission._tag === "Trial", generation: a.admission.generation })
            }
            break
          }
          case "end": {
            if (running.length === 0) break
            const [call] = running.splice(o.which % running.length, 1)
            if (call!.trial) {
              const end = Breaker.trialEnded(m, call!.generation, o.outcome, o.slow, permits)
              m = end.verdict === "open"
                ? Breaker.open(end.machine, now, 20)
                : end.verdict === "close"
                ? Breaker.close(end.machine)
                : end.machine
            } else if (Breaker.closedCounts(m, call!.generation, o.outcome)) {
              consecutive = o.outcome === "failure" ? consecutive + 1 : 0
              if (consecutive >= 3) {
                consecutive = 0
                m = Breaker.open(m, now, 20)
              }
            }
            break
          }
          case "isolate":
            m = Breaker.isolate(m)
            break
          case "reset":
            m = Breaker.reset(m)
        }
        const trials = running.filter((c) => c.trial).length
        expect(trials).toBeLessThanOrEqual(permits)
        expect(m.inFlight).toBe(trials)
        expect(m.admitted).toBeGreaterThanOrEqual(0)
        expect(m.admitted).toBeLessThanOrEqual(permits)
        expect(m.succeeded).toBeLessThanOrEqual(m.admitted)
        if (m.state !== "half-open") expect(m.admitted).toBe(0)
        expect(Breaker.retryAfterMillis(m, now)).toBeGreaterThanOrEqual(0)
      }
    }
  )

  it.prop(
    "time only moves an open machine forward: open, then half-open once openUntil is reached",
    [fc.integer({ min: 0, max: 1e6 }), fc.integer({ min: 0, max: 1e6 }), fc.integer({ min: 0, max: 2e6 })],
    ([at, delay, later]) => {
      const m = Breaker.open(Breaker.initial, at, delay)
      const r = Breaker.refresh(m, at + later)
      expect(r.state).toBe(later >= delay ? "half-open" : "open")
      expect(Breaker.refresh(r, at + later)).toBe(r)
    }
  )
})
