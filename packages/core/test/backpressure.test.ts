import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Backpressure from "../src/backpressure.js"
import { prop } from "./support/prop.js"

const config = Backpressure.defaults
const answer = (status: number, retryAfterMillis?: number, limits?: Backpressure.Answer["limits"]) => ({
  status,
  retryAfterMillis,
  limits
})

/** The evidence after these answers, one every `gap` ms from 0. */
const after = (answers: ReadonlyArray<Backpressure.Answer>, gap = 10) =>
  answers.reduce((e, a, i) => Backpressure.observe(e, a, i * gap, config), Backpressure.none)

describe("core/backpressure", () => {
  it("one refusal among healthy answers pauses nobody: its own retry waits for it", () => {
    const ok = Array.from({ length: 20 }, () => answer(200))
    expect(after([...ok, answer(503, 5_000)]).pausedUntil).toBe(0)
    // nor does a first answer that is a refusal: one answer is no evidence about the origin
    expect(after([answer(503, 5_000)]).pausedUntil).toBe(0)
  })

  it("an origin refusing most of its answers pauses every caller for the latest Retry-After", () => {
    const evidence = after([answer(503, 1_000), answer(503, 1_000), answer(503, 2_000)])
    expect(evidence.pausedUntil).toBe(20 + 2_000)
    // 12 % of refusals never reach the threshold
    const mixed = Array.from({ length: 200 }, (_, i) => i % 8 === 0 ? answer(503, 1_000) : answer(201))
    expect(after(mixed).pausedUntil).toBe(0)
  })

  it("old answers count less: refusals after a long healthy past still pause when they are what is left", () => {
    const healthy = Array.from({ length: 50 }, () => answer(200))
    const past = after(healthy)
    const later = [answer(503, 1_000), answer(503, 1_000), answer(503, 1_000), answer(503, 1_000)].reduce(
      (e, a, i) => Backpressure.observe(e, a, 120_000 + i * 10, config),
      past
    )
    expect(later.pausedUntil).toBe(120_030 + 1_000)
  })

  it("a spent quota (r=0) pauses the origin at once, for Retry-After when present, else for t", () => {
    const spent = [{ name: "default", remaining: 0, reset: 7 }]
    expect(Backpressure.observe(Backpressure.none, answer(201, undefined, spent), 0, config).pausedUntil).toBe(7_000)
    // Retry-After takes precedence over t
    expect(Backpressure.observe(Backpressure.none, answer(429, 1_000, spent), 0, config).pausedUntil).toBe(1_000)
    expect(Backpressure.quotaPauseMillis(answer(201, undefined, [{ name: "d", remaining: 3, reset: 7 }])))
      .toBeUndefined()
    expect(Backpressure.quotaPauseMillis(answer(201, undefined, [{ name: "d", remaining: 0 }]))).toBeUndefined()
    // the longest of the spent items
    expect(
      Backpressure.quotaPauseMillis(answer(200, undefined, [{ name: "a", remaining: 0, reset: 2 }, {
        name: "b",
        remaining: 0,
        reset: 5
      }]))
    ).toBe(5_000)
  })

  it("other statuses and refusals without Retry-After never pause", () => {
    expect(after([answer(500, 1_000), answer(500, 1_000), answer(500, 1_000), answer(500, 1_000)]).pausedUntil)
      .toBe(0)
    expect(after([answer(429), answer(429), answer(429), answer(429)]).pausedUntil).toBe(0)
  })

  prop(
    "a pause is never in the past, never NaN and never longer than the cap",
    [
      fc.array(
        fc.record({
          status: fc.integer({ min: 100, max: 599 }),
          retryAfterMillis: fc.option(fc.double({ noNaN: false }), { nil: undefined }),
          limits: fc.option(
            fc.array(fc.record({ name: fc.string(), remaining: fc.integer({ min: 0, max: 3 }), reset: fc.nat(100) })),
            { nil: undefined }
          )
        }),
        { maxLength: 30 }
      ),
      fc.integer({ min: 1, max: 100_000 })
    ],
    ([answers, maxPauseMillis]) => {
      let evidence = Backpressure.none
      answers.forEach((a, i) => {
        const now = i * 100
        evidence = Backpressure.observe(evidence, a, now, { ...config, maxPauseMillis })
        expect(Number.isNaN(evidence.pausedUntil)).toBe(false)
        expect(evidence.pausedUntil).toBeLessThanOrEqual(now + maxPauseMillis)
        expect(evidence.refusals).toBeLessThanOrEqual(evidence.answers)
      })
    }
  )

  it("a request waits for the pause, or gives up when its deadline comes first", () => {
    expect(Backpressure.hold(undefined, 1_000, undefined)).toEqual({ _tag: "Go" })
    expect(Backpressure.hold(900, 1_000, undefined)).toEqual({ _tag: "Go" })
    expect(Backpressure.hold(3_000, 1_000, undefined)).toEqual({ _tag: "Wait", millis: 2_000 })
    expect(Backpressure.hold(3_000, 1_000, 5_000)).toEqual({ _tag: "Wait", millis: 2_000 })
    expect(Backpressure.hold(3_000, 1_000, 2_000)).toEqual({ _tag: "GiveUp", until: 3_000 })
  })
})
