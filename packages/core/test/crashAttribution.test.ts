import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as core from "../src/crashAttribution.js"
import { overLimit } from "../src/visibility.js"
import { prop } from "./support/prop.js"

const { CHARGED, CLAIMED, NOT_HELD } = core

describe("core/crashAttribution", () => {
  it("a claim counts one receive; a plain claim is charged if lost, one that runs suspects alone is not", () => {
    expect(core.claim(core.fresh, true)).toEqual({ receiveCount: 1, state: CLAIMED, suspect: false })
    expect(core.claim(core.fresh, false)).toEqual({ receiveCount: 1, state: CHARGED, suspect: false })
  })

  it("a delivery lost while claimed beside others is given back; lost while alone it stays charged", () => {
    const lostBeside = core.claim(core.claim(core.fresh, true), true)
    expect(lostBeside).toEqual({ receiveCount: 1, state: CLAIMED, suspect: true })
    const lostAlone = core.claim(core.runAlone(core.claim(core.fresh, true)), true)
    expect(lostAlone).toEqual({ receiveCount: 2, state: CLAIMED, suspect: true })
    // a plain consumer's lost deliveries are all charged, as they always were
    const lostPlain = core.claim(core.claim(core.fresh, false), false)
    expect(lostPlain).toEqual({ receiveCount: 2, state: CHARGED, suspect: true })
  })

  it("a release with a verdict clears the suspicion; one unprocessed gives the receive back and keeps it", () => {
    const suspect = core.claim(core.claim(core.fresh, true), true)
    expect(core.release(suspect, false)).toEqual({ receiveCount: 1, state: NOT_HELD, suspect: false })
    expect(core.release(suspect, true)).toEqual({ receiveCount: 0, state: NOT_HELD, suspect: true })
    // released, the next claim does not judge it again
    expect(core.claim(core.release(suspect, true), true)).toEqual({ receiveCount: 1, state: CLAIMED, suspect: true })
    expect(core.mustRunAlone(true)).toBe(true)
    expect(core.mustRunAlone(false)).toBe(false)
    expect(core.mustRunAlone(undefined)).toBe(false)
  })

  it("handling order: the others first as claimed, then the suspects, fewest receives first", () => {
    const m = (id: string, receiveCount: number, suspect?: boolean) => ({ id, receiveCount, suspect })
    const batch = [m("p", 3, true), m("a", 1), m("s", 1, true), m("b", 2, false), m("t", 1, true)]
    expect(core.handlingOrder(batch).map((x) => x.id)).toEqual(["a", "b", "s", "t", "p"])
    const plain = [m("a", 1), m("b", 1)]
    expect(core.handlingOrder(plain)).toBe(plain)
  })

  prop(
    "a healthy message held at any number of crashes is never charged; a poison is dead-lettered after " +
      "maxReceiveCount crashes alone",
    [
      fc.integer({ min: 1, max: 6 }),
      // each round: the healthy message is lost beside a crash (true), or given back while a suspect runs alone
      fc.array(fc.boolean(), { maxLength: 30 })
    ],
    ([maxReceiveCount, rounds]) => {
      let healthy = core.fresh
      for (const lostBeside of rounds) {
        healthy = core.claim(healthy, true)
        expect(healthy.receiveCount).toBe(1)
        healthy = lostBeside ? healthy : core.release(healthy, true)
      }
      // the poison: its first crash beside other handlers, then alone every time, until it arrives over the limit
      let poison = core.claim(core.fresh, true)
      let crashes = 1
      let alone = 0
      for (;;) {
        poison = core.claim(poison, true)
        if (overLimit(poison.receiveCount, maxReceiveCount)) break
        expect(poison.suspect).toBe(true)
        poison = core.runAlone(poison)
        crashes++
        alone++
      }
      expect(alone).toBe(maxReceiveCount)
      expect(crashes).toBe(maxReceiveCount + 1)
    }
  )
})
