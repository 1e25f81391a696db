import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Criticality from "../src/criticality.js"
import { prop } from "./support/prop.js"

const shares = Criticality.defaultShares

describe("core/criticality", () => {
  it("keeps the top of the limit for higher criticality", () => {
    expect(Criticality.threshold(100, "critical", shares)).toBe(100)
    expect(Criticality.threshold(100, "default", shares)).toBe(90)
    expect(Criticality.threshold(100, "sheddable", shares)).toBe(70)
    expect(Criticality.admit(100, 69, "sheddable", shares)).toBe(true)
    expect(Criticality.admit(100, 70, "sheddable", shares)).toBe(false)
    expect(Criticality.admit(100, 70, "default", shares)).toBe(true)
    expect(Criticality.admit(100, 99, "critical", shares)).toBe(true)
    expect(Criticality.admit(100, 100, "critical", shares)).toBe(false)
  })

  it("admits one call of any criticality into an idle server with a limit of 1", () => {
    for (const c of Criticality.criticalities) {
      expect(Criticality.admit(1, 0, c, shares)).toBe(true)
      expect(Criticality.admit(1, 1, c, shares)).toBe(false)
    }
  })

  prop(
    "a request admitted at some criticality would be admitted at every higher one",
    [fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 0, max: 10_000 }), fc.double({ min: 0.01, max: 1 })],
    ([limit, inflight, sheddable]) => {
      const s = { default: Math.max(sheddable, 0.5), sheddable }
      const [critical, normal, low] = Criticality.criticalities.map((c) => Criticality.admit(limit, inflight, c, s))
      if (low) expect(normal).toBe(true)
      if (normal) expect(critical).toBe(true)
      if (inflight >= limit) expect(critical).toBe(false)
    }
  )

  it("parses the header strictly: unknown values are not a priority", () => {
    expect(Criticality.parse(" Critical ")).toBe("critical")
    expect(Criticality.parse("sheddable")).toBe("sheddable")
    expect(Criticality.parse("critical, sheddable")).toBeUndefined()
    expect(Criticality.parse("")).toBeUndefined()
    expect(Criticality.parse(undefined)).toBeUndefined()
    expect(Criticality.parse("urgent")).toBeUndefined()
  })
})
