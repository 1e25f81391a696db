import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as IdempotencyResponse from "../src/idempotencyResponse.js"
import * as Problem from "../src/problem.js"
import { prop } from "./support/prop.js"

const all = () => true

describe("core/idempotencyResponse", () => {
  it("never keeps 429 or 503; other 5xx follow storeServerErrors; then storeStatus", () => {
    expect(IdempotencyResponse.keeps(429, true, all)).toBe(false)
    expect(IdempotencyResponse.keeps(503, true, all)).toBe(false)
    expect(IdempotencyResponse.keeps(500, true, all)).toBe(true)
    expect(IdempotencyResponse.keeps(500, false, all)).toBe(false)
    expect(IdempotencyResponse.keeps(400, false, (s) => s !== 400)).toBe(false)
    expect(IdempotencyResponse.keeps(201, false, all)).toBe(true)
  })

  prop("keeps implies storeStatus agreed and the status asks for no return", [
    fc.integer({ min: 100, max: 599 }),
    fc.boolean(),
    fc.func(fc.boolean())
  ], ([status, serverErrors, storeStatus]) => {
    if (IdempotencyResponse.keeps(status, serverErrors, storeStatus)) {
      expect(storeStatus(status)).toBe(true)
      expect([429, 503]).not.toContain(status)
      if (status >= 500) expect(serverErrors).toBe(true)
    }
  })

  it("a defect's 500 is kept when storeStatus throws", () => {
    expect(IdempotencyResponse.keepsDefect(true, () => {
      throw new Error("bug")
    })).toBe(true)
    expect(IdempotencyResponse.keepsDefect(false, all)).toBe(false)
  })

  it("refusals: statuses, problem types and Retry-After", () => {
    expect([
      IdempotencyResponse.keyMissing("POST", "Idempotency-Key"),
      IdempotencyResponse.keyInvalid(255),
      IdempotencyResponse.bodyUnreadable,
      IdempotencyResponse.tooLarge(10),
      IdempotencyResponse.inProgress,
      IdempotencyResponse.mismatch,
      IdempotencyResponse.storeUnavailable,
      IdempotencyResponse.storeFull
    ].map((p) => [p.status, p.headers?.["retry-after"]])).toEqual([
      [400, undefined],
      [400, undefined],
      [400, undefined],
      [413, undefined],
      [409, "1"],
      [422, undefined],
      [503, "1"],
      [503, "60"]
    ])
    expect(Problem.problemBody(IdempotencyResponse.mismatch).type).toBe(
      "urn:effect-resilience:problem:idempotency-key-reused"
    )
  })

  it("a declared body length over the limit is refused before reading", () => {
    expect(IdempotencyResponse.declaredTooLarge("11", 10)).toBe(true)
    expect(IdempotencyResponse.declaredTooLarge("10", 10)).toBe(false)
    expect(IdempotencyResponse.declaredTooLarge(undefined, 10)).toBe(false)
    expect(IdempotencyResponse.declaredTooLarge("junk", 10)).toBe(false)
  })

  it("logs carry neither the key nor the scope digest", () => {
    const redact = IdempotencyResponse.redactor("k-42", "abc123")
    const error = new Error("claim k-42 failed", { cause: new Error("scope abc123 k-42") })
    expect(redact(IdempotencyResponse.describe(error))).toBe(
      "Error: claim <key> failed <- Error: scope <scope> <key>"
    )
    expect(IdempotencyResponse.describe("plain")).toBe("plain")
  })

  it("never replays cookies", () => {
    for (const h of IdempotencyResponse.neverReplayed) {
      expect(IdempotencyResponse.defaultReplayHeaders).not.toContain(h)
    }
  })
})
