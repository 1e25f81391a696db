import { describe, expect, it } from "vitest"
import * as Fleet from "../src/breakerFleet.js"

const view = (patch: Partial<Fleet.View> = {}): Fleet.View => ({
  inc: "a",
  epoch: 3,
  state: "closed",
  openUntil: 0,
  isolated: false,
  openings: 0,
  changedAt: 0,
  halfOpenUntil: 0,
  ...patch
})

describe("core/breakerFleet", () => {
  it("decodes the script's fields and messages, and rejects anything malformed", () => {
    expect(Fleet.fromFields(["a", "4", "open", "1500", "0", "2", "500", "0"])).toEqual(
      view({ epoch: 4, state: "open", openUntil: 1500, openings: 2, changedAt: 500 })
    )
    expect(Fleet.fromMessage("a|4|half-open|1500|1|2|500|2000")).toMatchObject({
      state: "half-open",
      isolated: true,
      halfOpenUntil: 2000
    })
    expect(Fleet.fromMessage("a|4|opened|1500|0|2|500|0")).toBeUndefined()
    expect(Fleet.fromMessage("a|x|open|1500|0|2|500|0")).toBeUndefined()
    expect(Fleet.fromMessage("|4|open|1500|0|2|500|0")).toBeUndefined()
    expect(Fleet.fromMessage("a|4|open|1500|yes|2|500|0")).toBeUndefined()
    expect(Fleet.fromMessage("a|4|open|1500|0|2|500")).toBeUndefined()
    expect(Fleet.fromMessage("a|4|open|1500|0|2|500|soon")).toBeUndefined()
    expect(Fleet.fromFields([])).toBeUndefined()
  })

  it("a message is news unless it is the very view the replica has; periods are told apart", () => {
    const known = view({ epoch: 5, state: "open", openUntil: 9000, changedAt: 4000, openings: 1 })
    expect(Fleet.isNews(known, "a|5|open|9000|0|1|4000|0")).toBe(false)
    // anything else asks Redis: a later or earlier epoch, another incarnation, garbage
    expect(Fleet.isNews(known, "a|6|half-open|9000|0|1|9000|0")).toBe(true)
    expect(Fleet.isNews(known, "a|4|closed|0|0|0|0|0")).toBe(true)
    expect(Fleet.isNews(known, "b|5|open|9000|0|1|4000|0")).toBe(true)
    expect(Fleet.isNews(known, "nonsense")).toBe(true)
    expect(Fleet.samePeriod(known, { ...known, isolated: true })).toBe(true)
    // Redis restored from a snapshot taken in another period of the same number: not the same period
    expect(Fleet.samePeriod(known, { ...known, state: "closed", changedAt: 100 })).toBe(false)
    expect(Fleet.samePeriod(known, { ...known, epoch: 0 })).toBe(false)
  })

  it("an open view is half-open once its time is up, unless isolated; retryAfter follows", () => {
    const open = view({ state: "open", openUntil: 1000 })
    expect(Fleet.stateAt(open, 999)).toBe("open")
    expect(Fleet.retryAfterMillis(open, 400, 100)).toBe(600)
    expect(Fleet.stateAt(open, 1000)).toBe("half-open")
    const isolated = view({ state: "open", openUntil: 1000, isolated: true })
    expect(Fleet.stateAt(isolated, 5000)).toBe("open")
    expect(Fleet.retryAfterMillis(isolated, 5000, 100)).toBe(Infinity)
    // half-open with every permit taken: the time left in the period; past its deadline, until the next flush
    const half = view({ state: "half-open", halfOpenUntil: 3000 })
    expect(Fleet.retryAfterMillis(half, 2200, 100)).toBe(800)
    expect(Fleet.retryAfterMillis(half, 3000, 100)).toBe(100)
    expect(Fleet.retryAfterMillis(view(), 3000, 100)).toBe(0)
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
    expect(Fleet.take(d)).toEqual({ calls: 4, failures: 3, slow: 2, trailing: 2, sawSuccess: true, asked: 300 })
    expect(d).toEqual(Fleet.makeDeltas())
  })

  it("the window's key names the policy's window", () => {
    expect(Fleet.windowSignature({ _tag: "Consecutive", failures: 5 })).toBe("c")
    const rate = { _tag: "FailureRate", threshold: 0.5, minimumCalls: 10, slowCall: undefined } as const
    expect(Fleet.windowSignature({ ...rate, window: { _tag: "Count", calls: 100 } })).toBe("n100")
    expect(Fleet.windowSignature({ ...rate, window: { _tag: "Time", millis: 10_000, buckets: 10 } })).toBe("t1000x10")
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
