import { fc, prop } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { HttpClassify } from "effect-resilience"

const idempotent = [
  "GET",
  "HEAD",
  "OPTIONS",
  "TRACE",
  "PUT",
  "DELETE",
  "get",
  "Head",
  "oPtIoNs",
  "trace",
  "put",
  "Delete"
]
// CONNECT is neither safe nor idempotent; PROPFIND/QUERY are extension methods we do not know about
const notIdempotent = ["POST", "PATCH", "post", "Patch", "CONNECT", "PROPFIND", "QUERY", "", " GET", "GET ", "GETX"]
// non-ASCII look-alikes that String.prototype.toUpperCase would fold onto an idempotent method
const lookAlikes = ["OPTION\u017f", "\u0131", "DELET\u00e9", "ＧＥＴ"]
const retryable = [408, 429, 500, 502, 503, 504]

type Row = readonly [method: string, outcome: HttpClassify.Outcome, key: boolean, expected: HttpClassify.Decision]

/** The table of the module documentation, spelled out row by row. */
const table = (): ReadonlyArray<Row> => {
  const rows: Array<Row> = []
  for (const key of [false, true]) {
    for (const method of [...idempotent, ...notIdempotent, ...lookAlikes]) {
      const safe = key || idempotent.includes(method)
      rows.push([method, HttpClassify.notSent, key, "retry"])
      rows.push([method, HttpClassify.unknownOutcome, key, safe ? "retry" : "fatal"])
      for (let code = 100; code <= 599; code++) {
        rows.push([method, HttpClassify.status(code), key, safe && retryable.includes(code) ? "retry" : "fatal"])
      }
    }
  }
  return rows
}

describe("HttpClassify", () => {
  it("follows the decision table for every method × outcome × key", () => {
    const rows = table()
    expect(rows.length).toBe(2 * (idempotent.length + notIdempotent.length + lookAlikes.length) * 502)
    const wrong = rows.filter(([method, outcome, hasIdempotencyKey, expected]) =>
      HttpClassify.classify({ method, outcome, hasIdempotencyKey }) !== expected
    )
    expect(wrong).toEqual([])
  })

  it("answers the reference exercises", () => {
    const c = HttpClassify.classify
    // (a) GET /users/7 → connect timeout
    expect(c({ method: "GET", outcome: HttpClassify.notSent, hasIdempotencyKey: false })).toBe("retry")
    // (b) POST /payments → read timeout: only with a key
    expect(c({ method: "POST", outcome: HttpClassify.unknownOutcome, hasIdempotencyKey: false })).toBe("fatal")
    expect(c({ method: "POST", outcome: HttpClassify.unknownOutcome, hasIdempotencyKey: true })).toBe("retry")
    // (c) PUT /users/7 → 503
    expect(c({ method: "PUT", outcome: HttpClassify.status(503), hasIdempotencyKey: false })).toBe("retry")
    // (d) POST /orders → 422, key or not
    expect(c({ method: "POST", outcome: HttpClassify.status(422), hasIdempotencyKey: true })).toBe("fatal")
  })

  it("named statuses", () => {
    const get = (code: number) => HttpClassify.classify({ method: "GET", outcome: HttpClassify.status(code) })
    for (const code of retryable) expect(get(code)).toBe("retry")
    for (const code of [200, 201, 204, 301, 304, 400, 401, 403, 404, 409, 410, 413, 422, 501, 505, 511]) {
      expect(get(code), String(code)).toBe("fatal")
    }
    const post = (code: number) => HttpClassify.classify({ method: "POST", outcome: HttpClassify.status(code) })
    for (const code of retryable) expect(post(code)).toBe("fatal")
  })

  it("hasIdempotencyKey defaults to false", () => {
    expect(HttpClassify.classify({ method: "POST", outcome: HttpClassify.status(503) })).toBe("fatal")
    expect(HttpClassify.classify({ method: "POST", outcome: HttpClassify.notSent })).toBe("retry")
  })

  it("invalid status codes are fatal, never an exception", () => {
    for (const code of [0, 99, 600, 999, -503, 503.5, Number.NaN, Infinity, -Infinity]) {
      expect(HttpClassify.classify({ method: "GET", outcome: HttpClassify.status(code), hasIdempotencyKey: true }))
        .toBe("fatal")
    }
  })

  it("unrecognised outcomes and junk input from untyped callers are fatal", () => {
    const junk = [
      { method: "GET", outcome: { _tag: "Other" } },
      { method: "GET", outcome: null },
      { method: "GET" },
      { method: 42, outcome: HttpClassify.unknownOutcome },
      { outcome: HttpClassify.status(503) },
      null,
      undefined
    ]
    for (const input of junk) expect(HttpClassify.classify(input as any)).toBe("fatal")
    expect(HttpClassify.isIdempotentMethod(undefined as any)).toBe(false)
  })

  it("exports the method and status sets; mutating them changes nothing", () => {
    expect([...HttpClassify.idempotentMethods].sort()).toEqual(["DELETE", "GET", "HEAD", "OPTIONS", "PUT", "TRACE"])
    expect([...HttpClassify.retryableStatuses].sort()).toEqual(retryable)
    ;(HttpClassify.retryableStatuses as Set<number>).add(404)
    ;(HttpClassify.idempotentMethods as Set<string>).add("POST")
    try {
      expect(HttpClassify.classify({ method: "GET", outcome: HttpClassify.status(404) })).toBe("fatal")
      expect(HttpClassify.isIdempotentMethod("POST")).toBe(false)
    } finally {
      ;(HttpClassify.retryableStatuses as Set<number>).delete(404)
      ;(HttpClassify.idempotentMethods as Set<string>).delete("POST")
    }
  })

  it("outcome values are frozen tagged data", () => {
    expect(HttpClassify.notSent).toEqual({ _tag: "NotSent" })
    expect(HttpClassify.unknownOutcome).toEqual({ _tag: "UnknownOutcome" })
    expect(HttpClassify.status(503)).toEqual({ _tag: "Status", code: 503 })
    expect(Object.isFrozen(HttpClassify.notSent)).toBe(true)
    expect(HttpClassify.isRetryableStatus(429)).toBe(true)
    expect(HttpClassify.isRetryableStatus(404)).toBe(false)
  })

  describe("properties", () => {
    const outcome = fc.oneof(
      fc.constant(HttpClassify.notSent),
      fc.constant(HttpClassify.unknownOutcome),
      fc.oneof(fc.integer(), fc.double(), fc.integer({ min: 100, max: 599 })).map(HttpClassify.status)
    )
    const method = fc.oneof(
      fc.string(),
      fc.string({ unit: "binary" }),
      fc.constantFrom(...idempotent, ...notIdempotent)
    )

    prop("total: any input gives retry or fatal", [method, outcome, fc.boolean()], ([m, o, k]) => {
      expect(["retry", "fatal"]).toContain(HttpClassify.classify({ method: m, outcome: o, hasIdempotencyKey: k }))
    })

    prop("a key never turns retry into fatal", [method, outcome], ([m, o]) => {
      if (HttpClassify.classify({ method: m, outcome: o, hasIdempotencyKey: false }) === "retry") {
        expect(HttpClassify.classify({ method: m, outcome: o, hasIdempotencyKey: true })).toBe("retry")
      }
    })

    prop("retry on a status implies a retryable status and a safe request", [method, outcome, fc.boolean()], (
      [m, o, k]
    ) => {
      if (o._tag === "Status" && HttpClassify.classify({ method: m, outcome: o, hasIdempotencyKey: k }) === "retry") {
        expect(HttpClassify.retryableStatuses.has(o.code)).toBe(true)
        expect(k || HttpClassify.isIdempotentMethod(m)).toBe(true)
      }
    })

    prop("only the six methods, in any ASCII case, are idempotent", [method], ([m]) => {
      expect(HttpClassify.isIdempotentMethod(m)).toBe(
        /^[a-z]+$/i.test(m) && HttpClassify.idempotentMethods.has(m.toUpperCase())
      )
    })
  })
})
