import { describe, expect, it } from "@effect/vitest"
import * as Fleet from "../../src/core/breakerFleet.js"

const view = (patch: Partial<Fleet.View> = {}): Fleet.View => ({
  inc: "a",
  epoch: 3,
  state: "closed",
  openUntil: 0,
  isolated: false,
  openings: 0,
  changedAt: 0,
  ...patch
})

describe("core/breakerFleet", () => {
  it("decodes the script's fields and messages, and rejects anything malformed", () => {
    expect(Fleet.fromFields(["a", "4", "open", "1500", "0", "2", "500"])).toEqual(
      view({ epoch: 4, state: "open", openUntil: 1500, openings: 2, changedAt: 500 })
    )
    expect(Fleet.fromMessage("a|4|half-open|1500|1|2|500")).toMatchObject({ state: "half-open", isolated: true })
    expect(Fleet.fromMessage("a|4|opened|1500|0|2|500")).toBeUndefined()
    expect(Fleet.fromMessage("a|x|open|1500|0|2|500")).toBeUndefined()
    expect(Fleet.fromMessage("|4|open|1500|0|2|500")).toBeUndefined()
    expect(Fleet.fromMessage("a|4|open|1500|yes|2|500")).toBeUndefined()
    expect(Fleet.fromMessage("a|4|open|1500|0|2")).toBeUndefined()
    expect(Fleet.fromFields([])).toBeUndefined()
  })

  it("a view supersedes another of the same incarnation only with a later epoch, or by adding isolated", () => {
    const known = view({ epoch: 5 })
    expect(Fleet.supersedes(known, view({ epoch: 6 }))).toBe(true)
    expect(Fleet.supersedes(known, view({ epoch: 5 }))).toBe(false)
    expect(Fleet.supersedes(known, view({ epoch: 4, state: "open" }))).toBe(false)
    expect(Fleet.supersedes(known, view({ epoch: 5, state: "open", isolated: true }))).toBe(true)
    // the state in Redis was lost and started over: its epochs start over too
    expect(Fleet.supersedes(known, view({ inc: "b", epoch: 0 }))).toBe(true)
    expect(Fleet.supersedes(Fleet.unknown, view({ epoch: 0 }))).toBe(true)
  })

  it("an open view is half-open once its time is up, unless isolated; retryAfter follows", () => {
    const open = view({ state: "open", openUntil: 1000 })
    expect(Fleet.stateAt(open, 999)).toBe("open")
    expect(Fleet.retryAfterMillis(open, 400)).toBe(600)
    expect(Fleet.stateAt(open, 1000)).toBe("half-open")
    expect(Fleet.retryAfterMillis(open, 1000)).toBe(0)
    const isolated = view({ state: "open", openUntil: 1000, isolated: true })
    expect(Fleet.stateAt(isolated, 5000)).toBe("open")
    expect(Fleet.retryAfterMillis(isolated, 5000)).toBe(Infinity)
    expect(Fleet.saved(open, 500)).toEqual({ state: "open", isolated: false, openUntil: 1000, openings: 0 })
    expect(Fleet.saved(open, 1000)).toEqual({ state: "half-open", isolated: false, openUntil: null, openings: 0 })
  })

  it("deltas count calls, failures, slow calls, the failures after the last success and the longest ask", () => {
    const d = Fleet.makeDeltas()
    Fleet.record(d, true, false, 0)
    Fleet.record(d, false, true, 0)
    Fleet.record(d, true, false, 300)
    expect(Fleet.record(d, true, true, 100)).toBe(4)
    expect(d).toEqual({ calls: 4, failures: 3, slow: 2, trailing: 2, sawSuccess: true, asked: 300 })
    expect(Fleet.take(d)).toEqual(["4", "3", "2", "2", "1"])
    expect(d).toEqual(Fleet.makeDeltas())
    Fleet.record(d, true, false, 0)
    expect(Fleet.take(d)).toEqual(["1", "1", "0", "1", "0"])
  })

  it("encodes each trip policy for the script", () => {
    expect(Fleet.policyArgs({ _tag: "Consecutive", failures: 5 })).toEqual(["c", "5", "0", "1", "1", "0"])
    expect(
      Fleet.policyArgs({
        _tag: "FailureRate",
        threshold: 0.5,
        minimumCalls: 10,
        window: { _tag: "Count", calls: 100 },
        slowCall: { millis: 200, rateThreshold: 0.25 }
      })
    ).toEqual(["n", "100", "0", "0.5", "10", "0.25"])
    expect(
      Fleet.policyArgs({
        _tag: "FailureRate",
        threshold: 0.5,
        minimumCalls: 10,
        window: { _tag: "Time", millis: 10_000, buckets: 10 },
        slowCall: undefined
      })
    ).toEqual(["t", "1000", "10", "0.5", "10", "0"])
  })
})
