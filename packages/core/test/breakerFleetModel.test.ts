import { describe, expect, it } from "vitest"
import * as Fleet from "../src/breakerFleet.js"
import * as Model from "../src/breakerFleetModel.js"
import type * as Protocol from "../src/breakerFleetProtocol.js"

const input = (patch: Partial<Protocol.Call>): Protocol.Call => ({
  op: "flush",
  now: 1000,
  epoch: -1,
  inc: "",
  since: 0,
  token: "r1",
  delay: 500,
  asked: 0,
  trialTimeout: 300,
  permits: 1,
  failureRate: undefined,
  leaseMillis: 1000,
  trip: { _tag: "Consecutive", failures: 2 },
  deltas: { calls: 2, failures: 2, slow: 0, trailing: 2, sawSuccess: false, asked: 0 },
  ...patch
})

describe("core/breakerFleetModel", () => {
  it("step: each creation of the state is a new incarnation; an epoch of another incarnation is no epoch", () => {
    const first = Model.emptyShared()
    expect(Model.step(first, input({})).view).toMatchObject({ inc: "r1.1000", epoch: 1, state: "open" })
    // the state lost, made again by the same replica later: another incarnation, which supersedes its view
    const again = Model.emptyShared()
    const next = Model.step(again, input({ op: "acquire", now: 5000, epoch: 1, inc: "r1.1000" })).view
    expect(next).toMatchObject({ inc: "r1.5000", epoch: 0, state: "closed" })
    // counts of epoch 0 of the old incarnation count as of no known epoch: added to the closed state
    const counted = Model.step(again, input({ now: 5100, epoch: 0, inc: "r1.1000" })).view
    expect(counted).toMatchObject({ inc: "r1.5000", epoch: 1, state: "open" })
    // a trial's report for an epoch of the old incarnation is not this one's
    const s = Model.emptyShared()
    Model.step(s, input({ now: 0 }))
    Model.step(s, input({ op: "acquire", now: 600, epoch: 1, inc: "r1.0" })) // half-open at epoch 2
    expect(Model.step(s, input({ op: "success", now: 700, epoch: 2, inc: "r2.0", since: 600 })).view.state).toBe(
      "half-open"
    )
    expect(Model.step(s, input({ op: "success", now: 700, epoch: 2, inc: "r1.0", since: 600 })).view.state).toBe(
      "closed"
    )
  })

  it("step: a half-open period whose trial has not ended by its deadline opens again, as of the deadline", () => {
    const s = Model.emptyShared()
    Model.step(s, input({ now: 0 })) // open until 500 (epoch 1)
    // half-open at 600; the first permit starts the period's clock: 300 ms
    const first = Model.step(s, input({ op: "acquire", now: 600, epoch: 1 }))
    expect(first).toMatchObject({ granted: true, view: { epoch: 2, state: "half-open", halfOpenUntil: 900 } })
    // every permit taken: refused, and the view says when the period ends
    expect(Model.step(s, input({ op: "acquire", now: 700, epoch: 2 }))).toMatchObject({
      granted: false,
      published: false,
      view: { state: "half-open", halfOpenUntil: 900 }
    })
    expect(Model.step(s, input({ now: 899, deltas: Fleet.makeDeltas() })).view.state).toBe("half-open")
    // any replica's call after the deadline reopens it, as of the deadline, for the next delay
    const reopened = Model.step(s, input({ now: 950, deltas: Fleet.makeDeltas() }))
    expect(reopened).toMatchObject({
      published: true,
      view: { epoch: 3, state: "open", changedAt: 900, openUntil: 1400, openings: 2, halfOpenUntil: 0 }
    })
    // the hung trial's late report is of a period that ended
    expect(Model.step(s, input({ op: "success", now: 1000, epoch: 2, inc: s.inc! })).view.epoch).toBe(3)
    // a deadline so long past that the next opening is over too: half-open again at once
    const t = Model.emptyShared()
    Model.step(t, input({ now: 0 }))
    Model.step(t, input({ op: "acquire", now: 600, epoch: 1 }))
    expect(Model.step(t, input({ now: 5000, deltas: Fleet.makeDeltas() })).view).toMatchObject({
      epoch: 4,
      state: "half-open",
      openings: 2,
      halfOpenUntil: 0
    })
    // a trial that gave its permit back: nothing runs, nothing times out
    const u = Model.emptyShared()
    Model.step(u, input({ now: 0 }))
    const granted = Model.step(u, input({ op: "acquire", now: 600, epoch: 1 })).view
    Model.step(u, input({ op: "release", now: 650, epoch: granted.epoch, inc: granted.inc, since: granted.changedAt }))
    expect(Model.step(u, input({ now: 5000, deltas: Fleet.makeDeltas() })).view).toMatchObject({
      state: "half-open",
      halfOpenUntil: 0
    })
    // a deadline set in another epoch (left behind by another version of the script) is none
    const v = Model.emptyShared()
    Model.step(v, input({ now: 0 }))
    Model.step(v, input({ op: "acquire", now: 600, epoch: 1 }))
    v.halfOpenEpoch = 0
    expect(Model.step(v, input({ now: 5000, deltas: Fleet.makeDeltas() })).view.state).toBe("half-open")
  })

  it("step: an epoch names a period only with its start: the same number reached again later is another period", () => {
    const s = Model.emptyShared()
    Model.step(s, input({ now: 0 })) // open until 500 (epoch 1)
    const snapshot = { ...s, chunks: [...s.chunks], buckets: new Map(s.buckets) }
    const granted = Model.step(s, input({ op: "acquire", now: 600, epoch: 1 })).view // half-open, epoch 2, from 600
    // the state set back to the snapshot: the next call half-opens it again, epoch 2 again, from 800
    Object.assign(s, snapshot)
    const again = Model.step(s, input({ now: 800, deltas: Fleet.makeDeltas() })).view
    expect(again).toMatchObject({ epoch: granted.epoch, state: "half-open", changedAt: 800 })
    // the first period's trial reports: not this period's
    const late = { epoch: granted.epoch, inc: granted.inc, since: granted.changedAt }
    expect(Model.step(s, input({ op: "success", now: 900, ...late })).view.state).toBe("half-open")
    expect(Model.step(s, input({ op: "failure", now: 900, ...late })).view.state).toBe("half-open")
    // this period's does
    const own = { epoch: again.epoch, inc: again.inc, since: again.changedAt }
    Model.step(s, input({ op: "acquire", now: 900, epoch: again.epoch }))
    expect(Model.step(s, input({ op: "success", now: 950, ...own })).view.state).toBe("closed")
  })

  it("step: with a failureRate the fleet's sample decides once every permit's trial reported; opened says who", () => {
    const s = Model.emptyShared()
    expect(Model.step(s, input({ now: 0 })).opened).toBe(true) // the flush's counts opened it (epoch 1)
    const rated = { permits: 3, failureRate: 0.5 }
    const views = [600, 601, 602].map((now) => Model.step(s, input({ ...rated, op: "acquire", now, epoch: 1 })))
    expect(views.map((r) => r.granted)).toEqual([true, true, true])
    const period = { epoch: 2, inc: s.inc!, since: 600 }
    expect(Model.step(s, input({ ...rated, op: "failure", now: 700, asked: 4000, ...period }))).toMatchObject({
      opened: false,
      view: { state: "half-open" }
    })
    expect(Model.step(s, input({ ...rated, op: "success", now: 710, ...period })).view.state).toBe("half-open")
    // 1 of 3 failed: below 0.5, closed by a success; no opening
    expect(Model.step(s, input({ ...rated, op: "success", now: 720, ...period }))).toMatchObject({
      opened: false,
      view: { state: "closed" }
    })
    // 2 of 3 failed: opened by the last report, a success, for the longest delay a failed trial asked for
    const t = Model.emptyShared()
    Model.step(t, input({ now: 0 }))
    for (const now of [600, 601, 602]) Model.step(t, input({ ...rated, op: "acquire", now, epoch: 1 }))
    const p = { epoch: 2, inc: t.inc!, since: 600 }
    Model.step(t, input({ ...rated, op: "failure", now: 700, asked: 4000, ...p }))
    Model.step(t, input({ ...rated, op: "failure", now: 701, ...p }))
    expect(Model.step(t, input({ ...rated, op: "success", now: 720, ...p }))).toMatchObject({
      opened: true,
      view: { state: "open", openUntil: 4720 }
    })
    // a half-open deadline opens it too, but no call's outcome did
    const u = Model.emptyShared()
    Model.step(u, input({ now: 0 }))
    Model.step(u, input({ op: "acquire", now: 600, epoch: 1 }))
    expect(Model.step(u, input({ now: 5000, deltas: Fleet.makeDeltas() }))).toMatchObject({
      opened: false,
      view: { state: "half-open", openings: 2 }
    })
  })
})
