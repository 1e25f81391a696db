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
  halfOpenUntil: 0,
  ...patch
})

const input = (patch: Partial<Fleet.StepInput>): Fleet.StepInput => ({
  op: "flush",
  now: 1000,
  epoch: -1,
  inc: "",
  token: "r1",
  delay: 500,
  asked: 0,
  trialTimeout: 300,
  permits: 1,
  leaseMillis: 1000,
  trip: { _tag: "Consecutive", failures: 2 },
  deltas: { calls: 2, failures: 2, slow: 0, trailing: 2, sawSuccess: false, asked: 0 },
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
    expect(Fleet.take(d)).toEqual(["4", "3", "2", "2", "1"])
    expect(d).toEqual(Fleet.makeDeltas())
    Fleet.record(d, true, false, 0)
    expect(Fleet.take(d)).toEqual(["1", "1", "0", "1", "0"])
  })

  it("step: each creation of the state is a new incarnation; an epoch of another incarnation is no epoch", () => {
    const first = Fleet.emptyShared()
    expect(Fleet.step(first, input({})).view).toMatchObject({ inc: "r1.1000", epoch: 1, state: "open" })
    // the state lost, made again by the same replica later: another incarnation, which supersedes its view
    const again = Fleet.emptyShared()
    const next = Fleet.step(again, input({ op: "acquire", now: 5000, epoch: 1, inc: "r1.1000" })).view
    expect(next).toMatchObject({ inc: "r1.5000", epoch: 0, state: "closed" })
    // counts of epoch 0 of the old incarnation count as of no known epoch: added to the closed state
    const counted = Fleet.step(again, input({ now: 5100, epoch: 0, inc: "r1.1000" })).view
    expect(counted).toMatchObject({ inc: "r1.5000", epoch: 1, state: "open" })
    // a trial's report for an epoch of the old incarnation is not this one's
    const s = Fleet.emptyShared()
    Fleet.step(s, input({ now: 0 }))
    Fleet.step(s, input({ op: "acquire", now: 600, epoch: 1, inc: "r1.0" })) // half-open at epoch 2
    expect(Fleet.step(s, input({ op: "success", now: 700, epoch: 2, inc: "r2.0" })).view.state).toBe("half-open")
    expect(Fleet.step(s, input({ op: "success", now: 700, epoch: 2, inc: "r1.0" })).view.state).toBe("closed")
  })

  it("step: a half-open period whose trial has not ended by its deadline opens again, as of the deadline", () => {
    const s = Fleet.emptyShared()
    Fleet.step(s, input({ now: 0 })) // open until 500 (epoch 1)
    // half-open at 600; the first permit starts the period's clock: 300 ms
    const first = Fleet.step(s, input({ op: "acquire", now: 600, epoch: 1 }))
    expect(first).toMatchObject({ granted: true, view: { epoch: 2, state: "half-open", halfOpenUntil: 900 } })
    // every permit taken: refused, and the view says when the period ends
    expect(Fleet.step(s, input({ op: "acquire", now: 700, epoch: 2 }))).toMatchObject({
      granted: false,
      published: false,
      view: { state: "half-open", halfOpenUntil: 900 }
    })
    expect(Fleet.step(s, input({ now: 899, deltas: Fleet.makeDeltas() })).view.state).toBe("half-open")
    // any replica's call after the deadline reopens it, as of the deadline, for the next delay
    const reopened = Fleet.step(s, input({ now: 950, deltas: Fleet.makeDeltas() }))
    expect(reopened).toMatchObject({
      published: true,
      view: { epoch: 3, state: "open", changedAt: 900, openUntil: 1400, openings: 2, halfOpenUntil: 0 }
    })
    // the hung trial's late report is of a period that ended
    expect(Fleet.step(s, input({ op: "success", now: 1000, epoch: 2, inc: s.inc! })).view.epoch).toBe(3)
    // a deadline so long past that the next opening is over too: half-open again at once
    const t = Fleet.emptyShared()
    Fleet.step(t, input({ now: 0 }))
    Fleet.step(t, input({ op: "acquire", now: 600, epoch: 1 }))
    expect(Fleet.step(t, input({ now: 5000, deltas: Fleet.makeDeltas() })).view).toMatchObject({
      epoch: 4,
      state: "half-open",
      openings: 2,
      halfOpenUntil: 0
    })
    // a trial that gave its permit back: nothing runs, nothing times out
    const u = Fleet.emptyShared()
    Fleet.step(u, input({ now: 0 }))
    const granted = Fleet.step(u, input({ op: "acquire", now: 600, epoch: 1 })).view
    Fleet.step(u, input({ op: "release", now: 650, epoch: granted.epoch, inc: granted.inc }))
    expect(Fleet.step(u, input({ now: 5000, deltas: Fleet.makeDeltas() })).view).toMatchObject({
      state: "half-open",
      halfOpenUntil: 0
    })
    // a deadline set in another epoch (left behind by another version of the script) is none
    const v = Fleet.emptyShared()
    Fleet.step(v, input({ now: 0 }))
    Fleet.step(v, input({ op: "acquire", now: 600, epoch: 1 }))
    v.halfOpenEpoch = 0
    expect(Fleet.step(v, input({ now: 5000, deltas: Fleet.makeDeltas() })).view.state).toBe("half-open")
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
