import { describe, expect, it } from "vitest"
import * as q from "../src/queueMessages.js"

describe("core/queueMessages", () => {
  it("splits a receipt at its last colon: a Redis stream id or a bigint position, and the token", () => {
    expect(q.parseReceipt("12:3")).toEqual([12, 3])
    expect(q.splitReceipt("1700000000000-0:2")).toEqual(["1700000000000-0", 2])
    expect(q.splitReceipt("9007199254740993:1")).toEqual(["9007199254740993", 1])
  })

  it("bodies: JSON only, a body JSON cannot carry is refused before anything is written", () => {
    expect(q.serialize({ n: 1 })).toEqual({ ok: true, text: "{\"n\":1}" })
    expect(q.serialize(undefined).ok).toBe(false)
    expect(q.serialize(() => 1).ok).toBe(false)
    expect(q.serialize(1n).ok).toBe(false)
    const cyclic: Record<string, unknown> = {}
    cyclic.self = cyclic
    expect(q.serializeAll([{ body: 1 }, { body: cyclic }]).ok).toBe(false)
    expect(q.serializeAll([{ body: 1 }, { body: "a" }])).toEqual({ ok: true, texts: ["1", "\"a\""] })
    expect(q.tryParse("{\"n\":1}")).toEqual({ ok: true, value: { n: 1 } })
    const bad = q.tryParse("{")
    expect(bad.ok).toBe(false)
    expect(q.corruptReason("x")).toBe("corrupt body: x")
  })

  it("partitions: one key always on one partition, spread over all of them; ids when there is no key", () => {
    expect(q.partitionOf(1, "a", "k")).toBe(0)
    const of = (key: string) => q.partitionOf(4, "id", key)
    expect(of("order-1")).toBe(of("order-1"))
    const used = new Set(Array.from({ length: 100 }, (_, i) => of(`k${i}`)))
    expect(used.size).toBe(4)
    expect(q.partitionOf(4, "m1", undefined)).toBe(q.partitionOf(4, "other", "m1"))
  })
})
