import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as HttpClassify from "../src/httpClassify.js"
import { prop } from "./support/prop.js"

const methods = fc.oneof(fc.constantFrom("GET", "POST", "PUT", "PATCH", "DELETE", "head", "Options"), fc.string())
const outcomes = fc.oneof(
  fc.constant(HttpClassify.notSent),
  fc.constant(HttpClassify.unknownOutcome),
  fc.integer({ min: 0, max: 700 }).map(HttpClassify.status)
)

describe("core/httpClassify", () => {
  it("retries what never left, and the rest only when safe to repeat", () => {
    expect(HttpClassify.classify({ method: "POST", outcome: HttpClassify.notSent })).toBe("retry")
    expect(HttpClassify.classify({ method: "POST", outcome: HttpClassify.unknownOutcome })).toBe("fatal")
    expect(HttpClassify.classify({ method: "POST", outcome: HttpClassify.unknownOutcome, hasIdempotencyKey: true }))
      .toBe("retry")
    expect(HttpClassify.classify({ method: "get", outcome: HttpClassify.status(503) })).toBe("retry")
    expect(HttpClassify.classify({ method: "GET", outcome: HttpClassify.status(404) })).toBe("fatal")
  })

  prop("retriesStatus agrees with classify on a status", [methods, fc.integer({ min: 0, max: 700 }), fc.boolean()], (
    [m, code, key]
  ) => {
    expect(HttpClassify.retriesStatus(m, code, key)).toBe(
      HttpClassify.classify({ method: m, outcome: HttpClassify.status(code), hasIdempotencyKey: key }) === "retry"
    )
  })

  prop("a key never turns retry into fatal", [methods, outcomes], ([m, o]) => {
    if (HttpClassify.classify({ method: m, outcome: o }) === "retry") {
      expect(HttpClassify.classify({ method: m, outcome: o, hasIdempotencyKey: true })).toBe("retry")
    }
  })

  it("honours Retry-After on 413, 429 and 503 only; 429 is no outage", () => {
    expect([413, 429, 503, 500, 502].map(HttpClassify.honoursRetryAfter)).toEqual([true, true, true, false, false])
    expect(HttpClassify.statusIsOutage(429)).toBe(false)
    expect(HttpClassify.statusIsOutage(503)).toBe(true)
  })

  it("finds a connect failure anywhere in the first eight causes", () => {
    const chain = (code: string, depth: number): unknown => {
      let e: unknown = Object.assign(new Error("inner"), { code })
      for (let i = 0; i < depth; i++) e = new Error("outer", { cause: e })
      return e
    }
    expect(HttpClassify.connectFailureReason(chain("ECONNREFUSED", 0))).toBe("refused")
    expect(HttpClassify.connectFailureReason(chain("UND_ERR_CONNECT_TIMEOUT", 7))).toBe("timeout")
    expect(HttpClassify.connectFailureReason(chain("ENOTFOUND", 8))).toBeUndefined()
    expect(HttpClassify.connectFailureReason(chain("ECONNRESET", 0))).toBeUndefined()
    // names of Object.prototype are not error codes
    expect(HttpClassify.connectFailureReason(chain("toString", 0))).toBeUndefined()
    expect(HttpClassify.connectFailureReason("ECONNREFUSED")).toBeUndefined()
  })
})
