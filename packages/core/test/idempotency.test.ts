import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as core from "../src/idempotency.js"
import { prop } from "./support/prop.js"

const record = (over: Partial<core.RecordView & { token: string }> = {}) => ({
  fingerprint: "f",
  completed: false,
  leaseUntil: 150,
  expiresAt: 1_000,
  token: "t",
  ...over
})

const arbitraryRecord = fc.record({
  fingerprint: fc.constantFrom("f", "g"),
  completed: fc.boolean(),
  leaseUntil: fc.integer({ min: 0, max: 2_000 }),
  expiresAt: fc.integer({ min: 0, max: 2_000 }),
  token: fc.constantFrom("t", "u")
})
const arbitraryNow = fc.integer({ min: 0, max: 2_500 })
const arbitraryFingerprint = fc.constantFrom("f", "g")

describe("core/idempotency", () => {
  describe("decideClaim", () => {
    it("no record, or an expired one: a new claim", () => {
      expect(core.decideClaim(undefined, "f", 100)).toBe("New")
      expect(core.decideClaim(record({ expiresAt: 100 }), "f", 100)).toBe("New")
      expect(core.decideClaim(record({ expiresAt: 100, completed: true }), "g", 100)).toBe("New")
    })

    it("a live record of another request: a mismatch, whatever its state", () => {
      expect(core.decideClaim(record(), "g", 100)).toBe("Mismatch")
      expect(core.decideClaim(record({ completed: true }), "g", 100)).toBe("Mismatch")
      expect(core.decideClaim(record({ leaseUntil: 50 }), "g", 100)).toBe("Mismatch")
    })

    it("completed: a replay, even after its lease", () => {
      expect(core.decideClaim(record({ completed: true, leaseUntil: 0 }), "f", 100)).toBe("Replay")
    })

    it("in progress: waits while the lease lives, is reclaimed from the instant it ends", () => {
      expect(core.decideClaim(record({ leaseUntil: 150 }), "f", 149)).toBe("InProgress")
      expect(core.decideClaim(record({ leaseUntil: 150 }), "f", 150)).toBe("Reclaim")
    })

    prop(
      "a claim is granted on a live claim in progress only once its lease has ended",
      [arbitraryRecord, arbitraryFingerprint, arbitraryNow],
      ([r, fingerprint, now]) => {
        const decision = core.decideClaim(r, fingerprint, now)
        if ((decision === "New" || decision === "Reclaim") && core.isAlive(r, now) && !r.completed) {
          expect(r.leaseUntil).toBeLessThanOrEqual(now)
        }
      }
    )

    prop(
      "a live completed record never runs the handler again: replay or mismatch",
      [arbitraryRecord, arbitraryFingerprint, arbitraryNow],
      ([r, fingerprint, now]) => {
        if (!r.completed || !core.isAlive(r, now)) return
        expect(core.decideClaim(r, fingerprint, now)).toBe(r.fingerprint === fingerprint ? "Replay" : "Mismatch")
      }
    )

    prop(
      "forgetting a record at its end changes no decision (what lets a store evict then)",
      [arbitraryRecord, arbitraryFingerprint, fc.integer({ min: 0, max: 500 })],
      ([r, fingerprint, after]) => {
        const now = core.endOf(r) + after
        expect(core.decideClaim(r, fingerprint, now)).toBe(core.decideClaim(undefined, fingerprint, now))
      }
    )
  })

  describe("ownership", () => {
    it("the token holder owns an in-progress live record, even with a lapsed lease", () => {
      expect(core.owns(record(), "t", 100)).toBe(true)
      expect(core.owns(record({ leaseUntil: 50 }), "t", 100)).toBe(true)
      expect(core.owns(record(), "u", 100)).toBe(false)
      expect(core.owns(record({ completed: true }), "t", 100)).toBe(false)
      expect(core.owns(record({ expiresAt: 100 }), "t", 100)).toBe(false)
    })

    prop(
      "after a reclaim with a new token the old owner owns nothing (fencing)",
      [arbitraryRecord, arbitraryNow, fc.integer({ min: 1, max: 1_000 }), fc.integer({ min: 1, max: 1_000 })],
      ([r, now, lease, ttl]) => {
        if (core.decideClaim(r, r.fingerprint, now) !== "Reclaim") return
        const next = { ...r, ...core.claimed(now, lease, ttl), token: `${r.token}'`, completed: false }
        expect(core.owns(next, r.token, now)).toBe(false)
        expect(core.owns(next, next.token, now)).toBe(true)
      }
    )
  })

  it("claimed, completed, renewed and end times", () => {
    expect(core.claimed(100, 10, 1_000)).toEqual({ leaseUntil: 110, expiresAt: 1_100 })
    expect(core.completedAt(200, 1_000)).toEqual({ leaseUntil: 0, expiresAt: 1_200 })
    expect(core.renewedLease(200, 30)).toBe(230)
    expect(core.endOf({ leaseUntil: 5_000, expiresAt: 1_000 })).toBe(5_000)
    expect(core.endOf({ leaseUntil: 0, expiresAt: 1_000 })).toBe(1_000)
  })

  prop(
    "a fresh claim is in progress for its lease and answers its own fingerprint with InProgress until then",
    [arbitraryNow, fc.integer({ min: 1, max: 1_000 }), fc.integer({ min: 1, max: 1_000 })],
    ([now, lease, ttl]) => {
      const r = { fingerprint: "f", completed: false, ...core.claimed(now, lease, ttl) }
      const during = now + Math.min(lease, ttl) - 1
      expect(core.decideClaim(r, "f", during)).toBe("InProgress")
    }
  )

  it("room: the store's bound first, then the scope's; the default scope cap is a tenth", () => {
    expect(core.room(9, 10, 0, 1)).toBe("Room")
    expect(core.room(10, 10, 0, 1)).toBe("Store")
    expect(core.room(10, 10, 5, 5)).toBe("Store")
    expect(core.room(5, 10, 5, 5)).toBe("Scope")
    expect(core.room(5, 10, 4, 5)).toBe("Room")
    expect(core.room(5, Infinity, 4, Infinity)).toBe("Room")
    expect(core.defaultMaxRecordsPerScope(10_000)).toBe(1_000)
    expect(core.defaultMaxRecordsPerScope(3)).toBe(1)
    expect(core.defaultMaxRecordsPerScope(1)).toBe(1)
    expect(core.defaultMaxRecordsPerScope(Infinity)).toBe(Infinity)
  })

  it("requestTarget: the path and query only, whatever the server's URL form", () => {
    expect(core.requestTarget("/orders?x=1")).toBe("/orders?x=1")
    expect(core.requestTarget("http://127.0.0.1:8080/orders?x=1")).toBe("/orders?x=1")
    expect(core.requestTarget("https://API.example.com:443/orders")).toBe("/orders")
    expect(core.requestTarget("*")).toBe("*")
    expect(core.requestTarget("example.com:443")).toBe("example.com:443")
  })

  it("bodyOfText: the bytes a decoded text stands for, only when it stands for exactly one body", () => {
    const hex = (bytes: Uint8Array | undefined) => bytes === undefined ? undefined : Buffer.from(bytes).toString("hex")
    const decoded = (h: string) => Buffer.from(h, "hex").toString("utf8") // Node's decoder: keeps a BOM
    // valid UTF-8 encodes back to its bytes, a byte order mark included
    for (const h of ["", "7b7d", "636166c3a9", "e29895", "f09f9880", "efbbbf7b7d"]) {
      expect(hex(core.bodyOfText(decoded(h), false, undefined)), h).toBe(h)
    }
    // not UTF-8: two bodies, one text; and a body holding U+FFFD itself cannot be told from them
    expect(decoded("ff01")).toBe(decoded("fe01"))
    for (const h of ["ff01", "fe01", "c0af", "eda080", "e298", "efbfbd01"]) {
      expect(core.bodyOfText(decoded(h), false, undefined), h).toBeUndefined()
    }
    // a decoder that dropped a leading BOM: the declared length says whether there was one
    expect(hex(core.bodyOfText("{}", true, "2"))).toBe("7b7d")
    expect(hex(core.bodyOfText("{}", true, " 5 "))).toBe("efbbbf7b7d")
    expect(core.bodyOfText("{}", true, undefined)).toBeUndefined()
    expect(core.bodyOfText("{}", true, "")).toBeUndefined()
    expect(core.bodyOfText("{}", true, "4")).toBeUndefined()
    expect(core.bodyOfText("{}", true, "x")).toBeUndefined()
  })

  it("requestTarget: the target as sent, nothing normalised, never the authority", () => {
    // an empty query, a fragment, dot segments, escapes: another target, as the client wrote it
    for (
      const target of ["/orders?", "/orders#frag", "/orders?#", "/a/../orders", "/%6Frders", "//orders", "/orders/"]
    ) {
      expect(core.requestTarget(target)).toBe(target)
    }
    expect(core.requestTarget("http://h/orders?")).toBe("/orders?")
    expect(core.requestTarget("http://h/orders#frag")).toBe("/orders#frag")
    expect(core.requestTarget("http://h/a/../orders")).toBe("/a/../orders")
    // whatever the authority (a malformed one too), and an empty path is "/"
    expect(core.requestTarget("http://bad host:x/orders")).toBe("/orders")
    expect(core.requestTarget("http://user@[::1]:8080/orders?x=1")).toBe("/orders?x=1")
    expect(core.requestTarget("http://h")).toBe("/")
    expect(core.requestTarget("http://h?x=1")).toBe("/?x=1")
    expect(core.requestTarget("HTTPS://h/orders")).toBe("/orders")
    // not an absolute URI: as it is
    expect(core.requestTarget("orders")).toBe("orders")
    expect(core.requestTarget("")).toBe("")
  })
})
