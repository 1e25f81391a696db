import { describe, expect, it } from "vitest"
import * as HttpHeaders from "../src/httpHeaders.js"

describe("core/httpHeaders", () => {
  it("every shared name is lower case, and spelled as its specification writes it", () => {
    const names = [
      HttpHeaders.idempotencyKey,
      HttpHeaders.requestTimeout,
      HttpHeaders.criticality,
      HttpHeaders.retryAfter,
      HttpHeaders.rateLimit,
      HttpHeaders.rateLimitPolicy
    ]
    expect(Object.keys(HttpHeaders.spelled).sort()).toEqual([...names].sort())
    for (const [name, spelled] of Object.entries(HttpHeaders.spelled)) expect(spelled.toLowerCase()).toBe(name)
    expect(HttpHeaders.spelled[HttpHeaders.idempotencyKey]).toBe("Idempotency-Key")
    expect(HttpHeaders.spelled[HttpHeaders.requestTimeout]).toBe("Request-Timeout-Ms")
  })
})
