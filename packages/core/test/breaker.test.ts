import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Breaker from "../src/breaker.js"
import { prop } from "./support/prop.js"

/** Opens for `delay`; the half-open period after it times out `delay` after its first trial (the default). */
const opened = (m: Breaker.Machine, now: number, delay: number) => Breaker.open(m, now, delay, delay)

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
    // every permit taken: the time left in the half-open period, which started with the first trial
    const c = Breaker.admit(b.machine, 1600, 2)
    expect(c.admission).toEqual({ _tag: "Rejected", retryAfterMillis: 400 })
    expect(c.machine).toMatchObject({ state: "half-open", admitted: 2, halfOpenUntil: 2000 })
    expect(c.machine.leases).toHaveLength(2)
  })

  it("every trial succeeding closes; one failing (or slow) opens", () => {
    const half = Breaker.admit(opened(Breaker.initial, 0, 10), 10, 2)
    const two = Breaker.admit(half.machine, 10, 2).machine
    const first = Breaker.trialEnded(two, 2, "success", false, 2, undefined)
    expect(first.verdict).toBe("none")
    expect(Breaker.trialEnded(first.machine, 2, "success", false, 2, undefined).verdict).toBe("close")
    expect(Breaker.trialEnded(first.machine, 2, "failure", false, 2, undefined).verdict).toBe("open")
    expect(Breaker.trialEnded(first.machine, 2, "success", true, 2, undefined).verdict).toBe("open")
    const closed = Breaker.close(Breaker.trialEnded(first.machine, 2, "success", false, 2, undefined).machine)
    expect(closed).toMatchObject({ state: "closed", openings: 0, admitted: 0, succeeded: 0, leases: [] })
  })

  it("an interrupted trial gives its permit back; a stale trial only leaves the in-flight count", () => {
    const t = Breaker.admit(opened(Breaker.initial, 0, 10), 10, 1)
    const back = Breaker.trialEnded(t.machine, 2, "ignored", false, 1, undefined)
    expect(back.machine).toMatchObject({ admitted: 0, leases: [] })
    const reopened = opened(t.machine, 11, 10)
    const stale = Breaker.trialEnded(reopened, 2, "success", false, 1, undefined)
    expect(stale).toEqual({ machine: { ...reopened, leases: [] }, verdict: "none" })
  })

  it("a trial still running from an earlier period holds its permit", () => {
    const t = Breaker.admit(opened(Breaker.initial, 0, 10), 10, 1).machine
    const again = Breaker.open(t, 10, 10, 50) // another trial failed meanwhile, in this toy history
    // its permit is held until its own period's deadline (10 + 10): the caller is told when that comes
    expect(Breaker.admit(again, 15, 1).admission).toEqual({ _tag: "Rejected", retryAfterMillis: 5 })
    expect(Breaker.admit(again, 20, 1).admission).toEqual({ _tag: "Trial", generation: 4 })
  })

  it("a half-open period whose trial has not ended by its deadline has expired; the trial's permit is freed", () => {
    const m = Breaker.open(Breaker.initial, 0, 1000, 300)
    // the period's clock starts with its first trial, not when the breaker half-opened
    const t = Breaker.admit(m, 1500, 1).machine
    expect(t.halfOpenUntil).toBe(1800)
    expect(Breaker.expiredAt(t, 1799)).toBeUndefined()
    expect(Breaker.admit(t, 1799, 1).admission).toEqual({ _tag: "Rejected", retryAfterMillis: 1 })
    expect(Breaker.expiredAt(t, 1800)).toBe(1800)
    expect(Breaker.expiredAt(t, 9000)).toBe(1800)
    // the caller opens it again as of the deadline; the hung trial's late end decides nothing
    const reopened = Breaker.open(Breaker.refresh(t, 1900), 1800, 2000, 2000)
    expect(reopened).toMatchObject({ state: "open", openUntil: 3800, openings: 2, leases: [] })
    const late = Breaker.trialEnded(reopened, t.generation, "success", false, 1, undefined)
    expect(late).toEqual({ machine: reopened, verdict: "none" })
    // a half-open period with no trial running never expires: it waits for a caller
    expect(Breaker.expiredAt(Breaker.refresh(m, 1000), 1e9)).toBeUndefined()
    // nor does one whose trials all ended (an interrupted one gave its permit back)
    const back = Breaker.trialEnded(t, t.generation, "ignored", false, 1, undefined).machine
    expect(Breaker.expiredAt(back, 1e9)).toBeUndefined()
  })

  it("a trial admitted while none of its period runs starts the period's clock again: a sparse period can close", () => {
    const m = Breaker.open(Breaker.initial, 0, 1000, 300)
    const first = Breaker.admit(m, 1000, 2).machine
    const ended = Breaker.trialEnded(first, first.generation, "success", false, 2, undefined).machine
    // long after the first trial's deadline (1300), the second comes: nothing ran meanwhile, nothing hung
    const second = Breaker.admit(Breaker.refresh(ended, 5000), 5000, 2).machine
    expect(second.halfOpenUntil).toBe(5300)
    expect(Breaker.expiredAt(second, 5100)).toBeUndefined()
    expect(Breaker.trialEnded(Breaker.refresh(second, 5100), second.generation, "success", false, 2, undefined).verdict)
      .toBe(
        "close"
      )
    // while a trial runs, the next one shares its clock
    const both = Breaker.admit(first, 1200, 2).machine
    expect(both.halfOpenUntil).toBe(1300)
  })

  it("a trial ending at or after its period's deadline decides nothing, even before the caller reopened", () => {
    const t = Breaker.admit(Breaker.open(Breaker.initial, 0, 10, 10), 10, 1).machine
    expect(Breaker.trialEnded(Breaker.refresh(t, 20), t.generation, "success", false, 1, undefined).verdict).toBe(
      "none"
    )
    expect(Breaker.trialEnded(Breaker.refresh(t, 19), t.generation, "success", false, 1, undefined).verdict).toBe(
      "close"
    )
  })

  it("isolate holds open until reset; the time-up refresh does not half-open it", () => {
    const m = Breaker.isolate(Breaker.initial)
    expect(m).toMatchObject({ state: "open", isolated: true, generation: 1 })
    expect(Breaker.refresh(m, Number.MAX_SAFE_INTEGER)).toBe(m)
    expect(Breaker.retryAfterMillis(m, 0, 1)).toBe(Infinity)
    expect(Breaker.isolate(m)).toBe(m)
    expect(Breaker.reset(m)).toMatchObject({ state: "closed", isolated: false, generation: 2 })
  })

  it("save and restore: open stays open until openUntil, half-open restores with no trial running", () => {
    const m = opened(Breaker.initial, 0, 100)
    expect(Breaker.save(m)).toEqual({ state: "open", isolated: false, openUntil: 100, openings: 1 })
    expect(Breaker.restore(Breaker.save(m), 100)).toMatchObject({ state: "open", openUntil: 100, openings: 1 })
    expect(Breaker.restore({ state: "half-open", isolated: false, openUntil: null, openings: 3 }, 400)).toMatchObject({
      state: "half-open",
      admitted: 0,
      leases: [],
      openings: 3,
      trialTimeout: 400
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

  prop(
    "never more than `permits` trials hold a permit, a rejection in half-open says when to come back, and the counters stay consistent",
    [fc.integer({ min: 1, max: 4 }), fc.constantFrom(undefined, 0.25, 0.5, 1), fc.array(op, { maxLength: 200 })],
    ([permits, failureRate, ops]) => {
      let m = Breaker.initial
      let now = 0
      let consecutive = 0
      // open for 20 ms; a half-open period waits 30 ms for its trials, so a trial can outlive its period
      const reopen = (machine: Breaker.Machine, at: number) => Breaker.open(machine, at, 20, 30)
      // what the shell does before every decision: half-open, and reopen a period that timed out
      const refresh = () => {
        m = Breaker.refresh(m, now)
        const deadline = Breaker.expiredAt(m, now)
        if (deadline !== undefined) m = Breaker.refresh(reopen(m, deadline), now)
      }
      const running: Array<{ readonly trial: boolean; readonly generation: number; readonly until: number }> = []
      for (const o of ops) {
        switch (o._tag) {
          case "tick":
            now += o.millis
            refresh()
            break
          case "call": {
            refresh()
            const a = Breaker.admit(m, now, permits)
            m = a.machine
            if (a.admission._tag === "Rejected") {
              if (m.state === "half-open") expect(a.admission.retryAfterMillis).toBeGreaterThan(0)
            } else {
              const trial = a.admission._tag === "Trial"
              running.push({ trial, generation: a.admission.generation, until: trial ? m.halfOpenUntil : Infinity })
            }
            break
          }
          case "end": {
            if (running.length === 0) break
            refresh()
            const [call] = running.splice(o.which % running.length, 1)
            if (call!.trial) {
              const end = Breaker.trialEnded(m, call!.generation, o.outcome, o.slow, permits, failureRate)
              // a trial past its period's deadline decides nothing
              if (now >= call!.until) expect(end.verdict).toBe("none")
              // an ignored trial decides nothing and changes no count but its own permit
              if (o.outcome === "ignored") {
                expect(end.verdict).toBe("none")
                const { admitted, failed, generation, state, succeeded } = end.machine
                expect({ state, generation, succeeded, failed }).toEqual({
                  state: m.state,
                  generation: m.generation,
                  succeeded: m.succeeded,
                  failed: m.failed
                })
                const current = call!.generation === m.generation && m.leases.some((l) => l.generation === m.generation)
                expect(admitted).toBe(current ? m.admitted - 1 : m.admitted)
              }
              m = end.verdict === "open"
                ? reopen(end.machine, now)
                : end.verdict === "close"
                ? Breaker.close(end.machine)
                : end.machine
            } else if (Breaker.closedCounts(m, call!.generation, o.outcome)) {
              consecutive = o.outcome === "failure" ? consecutive + 1 : 0
              if (consecutive >= 3) {
                consecutive = 0
                m = reopen(m, now)
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
        const holding = running.filter((c) => c.trial && now < c.until).length
        expect(holding).toBeLessThanOrEqual(permits)
        expect(m.leases).toHaveLength(holding)
        expect(m.admitted).toBeGreaterThanOrEqual(0)
        expect(m.admitted).toBeLessThanOrEqual(permits)
        expect(m.succeeded + m.failed).toBeLessThanOrEqual(m.admitted)
        // without a failure rate, a failed trial never stays in the sample: it reopened the breaker
        if (failureRate === undefined) expect(m.failed).toBe(0)
        if (m.state !== "half-open") expect(m.admitted).toBe(0)
        // after the shell's refresh, no half-open period is left past its deadline with a trial running
        expect(Breaker.expiredAt(m, now)).toBeUndefined()
        expect(Breaker.retryAfterMillis(m, now, permits)).toBeGreaterThanOrEqual(0)
      }
    }
  )

  it("halfOpenFailureRate: nothing is decided before every permit's trial ended; then the rate decides", () => {
    const half = Breaker.refresh(opened(Breaker.initial, 0, 10), 10)
    let m = half
    for (let i = 0; i < 4; i++) m = Breaker.admit(m, 10, 4).machine
    const end = (machine: Breaker.Machine, outcome: Breaker.Outcome) =>
      Breaker.trialEnded(machine, half.generation, outcome, false, 4, 0.5)
    const one = end(m, "failure")
    expect(one.verdict).toBe("none")
    const two = end(end(one.machine, "success").machine, "success")
    expect(two.verdict).toBe("none")
    // 1 of 4 failed: 0.25 < 0.5
    expect(end(two.machine, "success").verdict).toBe("close")
    // 2 of 4 failed: 0.5 is not below 0.5
    expect(end(two.machine, "failure").verdict).toBe("open")
    // an ignored trial is no part of the sample: its permit is back, for another trial
    const back = end(two.machine, "ignored")
    expect(back).toMatchObject({ verdict: "none", machine: { admitted: 3, succeeded: 2, failed: 1 } })
    expect(Breaker.admit(back.machine, 11, 4).admission._tag).toBe("Trial")
    // without a rate, the first failure decides
    expect(Breaker.trialEnded(m, half.generation, "failure", false, 4, undefined).verdict).toBe("open")
    expect(Breaker.halfOpenVerdict(4, 3, 1, undefined)).toBe("open")
    expect(Breaker.halfOpenVerdict(4, 4, 0, undefined)).toBe("close")
  })

  prop(
    "with halfOpenFailureRate the verdict is the rule over the sample, and it comes with the last trial",
    [
      fc.integer({ min: 1, max: 6 }).chain((permits) =>
        fc.tuple(
          fc.constant(permits),
          fc.double({ min: 0.01, max: 1, noNaN: true }),
          // each permit's trial: how it ends (ignored ones are replaced by another trial), in which order
          fc.array(fc.constantFrom<Array<Breaker.Outcome>>("success", "failure", "ignored"), {
            minLength: permits,
            maxLength: 3 * permits
          })
        )
      )
    ],
    ([[permits, rate, outcomes]]) => {
      let m = Breaker.refresh(opened(Breaker.initial, 0, 10), 10)
      const generation = m.generation
      let failed = 0
      let ended = 0
      for (const outcome of outcomes) {
        if (ended === permits) break
        m = Breaker.admit(m, 10, permits).machine
        const end = Breaker.trialEnded(m, generation, outcome, false, permits, rate)
        m = end.machine
        if (outcome !== "ignored") {
          ended++
          if (outcome === "failure") failed++
        }
        if (ended < permits) expect(end.verdict).toBe("none")
        else expect(end.verdict).toBe(failed / permits < rate ? "close" : "open")
      }
    }
  )

  prop(
    "time only moves an open machine forward: open, then half-open once openUntil is reached",
    [fc.integer({ min: 0, max: 1e6 }), fc.integer({ min: 0, max: 1e6 }), fc.integer({ min: 0, max: 2e6 })],
    ([at, delay, later]) => {
      const m = Breaker.open(Breaker.initial, at, delay, delay)
      const r = Breaker.refresh(m, at + later)
      expect(r.state).toBe(later >= delay ? "half-open" : "open")
      expect(Breaker.refresh(r, at + later)).toBe(r)
    }
  )
})
