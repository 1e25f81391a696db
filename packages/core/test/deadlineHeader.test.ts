import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as DeadlineHeader from "../src/deadlineHeader.js"
import { prop } from "./support/prop.js"

describe("core/deadlineHeader", () => {
  it("reads whole non-negative milliseconds only", () => {
    expect(DeadlineHeader.parse(" 250 ")).toBe(250)
    for (const v of ["", "-1", "1.5", "1e3", "0x10", "1234567890123456"]) {
      expect(DeadlineHeader.parse(v), v).toBeUndefined()
    }
  })

  it("clamps the requested budget, or falls back", () => {
    expect(DeadlineHeader.serverBudget(90_000, 60_000, undefined)).toBe(60_000)
    expect(DeadlineHeader.serverBudget(undefined, 60_000, 5_000)).toBe(5_000)
    expect(DeadlineHeader.serverBudget(undefined, 60_000, undefined)).toBeUndefined()
  })

  prop("the client never promises more than its attempt or the deadline allows", [
    fc.integer({ min: 0, max: 1e9 }),
    fc.option(fc.integer({ min: 0, max: 2e9 }), { nil: undefined }),
    fc.integer({ min: 0, max: 2e9 })
  ], ([attempt, deadline, now]) => {
    const sent = Number(DeadlineHeader.clientValue(attempt, deadline, now))
    expect(sent).toBeGreaterThanOrEqual(0)
    expect(sent).toBeLessThanOrEqual(attempt)
    if (deadline !== undefined) expect(sent).toBeLessThanOrEqual(Math.max(0, deadline - now))
    expect(DeadlineHeader.parse(String(sent))).toBe(sent)
  })

  it("sends nothing without a finite budget", () => {
    expect(DeadlineHeader.clientValue(Infinity, undefined, 0)).toBeUndefined()
    expect(DeadlineHeader.clientValue(Infinity, 10.7, 0)).toBe("10")
  })
})
