import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as parse from "../src/structuredFields.js"
import * as serialize from "../src/structuredFieldsSerialize.js"
import { prop } from "./support/prop.js"

const sf = { ...parse, ...serialize }

const item = (value: parse.BareItem, params: ReadonlyArray<readonly [string, parse.BareItem]> = []): parse.Item => ({
  _tag: "Item",
  value,
  params: new Map(params)
})

const lcalpha = "abcdefghijklmnopqrstuvwxyz"
const alpha = lcalpha + lcalpha.toUpperCase()
const tchars = alpha + "0123456789!#$%&'*+-.^_`|~:/"
const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join("")
const base64 = alpha + "0123456789+/"

const chars = (set: string) => fc.constantFrom(...set.split(""))
const text = (set: string, minLength = 0) => fc.array(chars(set), { minLength, maxLength: 12 }).map((a) => a.join(""))

const key = fc.tuple(chars(lcalpha + "*"), text(lcalpha + "0123456789_-.*")).map(([a, b]) => a + b)
const bareItem: fc.Arbitrary<parse.BareItem> = fc.oneof(
  fc.integer({ min: -sf.maxInteger, max: sf.maxInteger }).map((value) => ({
    type: "integer" as const,
    value: value || 0
  })),
  // three decimals exactly: what the wire carries
  fc.integer({ min: -999_999_999_999, max: 999_999_999_999 }).chain((whole) =>
    fc.integer({ min: 0, max: 999 }).map((milli) => {
      const value = Number(`${whole}.${String(milli).padStart(3, "0")}`)
      return { type: "decimal" as const, value: value || 0 }
    })
  ),
  text(printable).map((value) => ({ type: "string" as const, value })),
  fc.tuple(chars(alpha + "*"), text(tchars)).map(([a, b]) => ({ type: "token" as const, value: a + b })),
  text(base64).map((value) => ({ type: "byteSequence" as const, value })),
  fc.boolean().map((value) => ({ type: "boolean" as const, value })),
  fc.integer({ min: -sf.maxInteger, max: sf.maxInteger }).map((value) => ({
    type: "date" as const,
    value: value || 0
  })),
  fc.string({ unit: "grapheme", maxLength: 8 }).map((value) => ({ type: "displayString" as const, value }))
)
const params = fc.uniqueArray(fc.tuple(key, bareItem), { selector: ([k]) => k, maxLength: 3 }).map((ps) => new Map(ps))
const anItem: fc.Arbitrary<parse.Item> = fc.record({ _tag: fc.constant("Item" as const), value: bareItem, params })
const member: fc.Arbitrary<parse.ListMember> = fc.oneof(
  anItem,
  fc.record({
    _tag: fc.constant("InnerList" as const),
    items: fc.array(anItem, { maxLength: 3 }),
    params
  })
)

describe("core/structuredFields", () => {
  it("parses each kind of bare item", () => {
    const parsed = sf.parseList("1, -2.5, \"s\\\"q\", tok/en:x, :aGk=:, ?0, @1700000000, %\"caf%c3%a9\"")
    expect(parsed?.map((m) => m._tag === "Item" ? m.value : undefined)).toEqual([
      { type: "integer", value: 1 },
      { type: "decimal", value: -2.5 },
      { type: "string", value: "s\"q" },
      { type: "token", value: "tok/en:x" },
      { type: "byteSequence", value: "aGk=" },
      { type: "boolean", value: false },
      { type: "date", value: 1700000000 },
      { type: "displayString", value: "café" }
    ])
  })

  it("rejects malformed lists: trailing comma, 16 digits, 4 decimals, bad key, unclosed string", () => {
    for (const v of ["a,", "1234567890123456", "1.2345", "a;A=1", "\"open", "(a b", "a;k=", "%\"%C3%A9\"", "a b"]) {
      expect(sf.parseList(v), v).toBeUndefined()
    }
  })

  it("serialises items, parameters and inner lists as RFC 9651 §4.1 writes them", () => {
    expect(sf.serializeList([
      item({ type: "token" as const, value: "a" }, [["q", { type: "integer", value: 10 }], ["x", {
        type: "boolean",
        value: true
      }]]),
      {
        _tag: "InnerList",
        items: [item({ type: "string" as const, value: "b" }), item({ type: "decimal", value: 2 })],
        params: new Map()
      }
    ])).toBe("a;q=10;x, (\"b\" 2.0)")
    expect(sf.serializeItem(item({ type: "decimal", value: 1.23456 }))).toBe("1.235")
    expect(sf.serializeItem(item({ type: "displayString" as const, value: "100% \"é\"" }))).toBe(
      "%\"100%25 %22%c3%a9%22\""
    )
    expect(
      sf.serializeItem(item({ type: "boolean" as const, value: false }, [["k", { type: "boolean", value: false }]]))
    )
      .toBe("?0;k=?0")
  })

  it("refuses what the wire cannot carry", () => {
    const bad: ReadonlyArray<parse.BareItem> = [
      { type: "integer", value: 1e15 },
      { type: "integer", value: 1.5 },
      { type: "decimal", value: 1e12 },
      { type: "decimal", value: Number.NaN },
      { type: "string", value: "tab\t" },
      { type: "token", value: "1abc" },
      { type: "token", value: "" },
      { type: "byteSequence", value: "no spaces" },
      { type: "displayString", value: "\ud800" }
    ]
    for (const value of bad) expect(sf.serializeBareItem(value), JSON.stringify(value)).toBeUndefined()
    expect(sf.serializeItem(item({ type: "integer", value: 1 }, [["Upper", { type: "integer", value: 1 }]])))
      .toBeUndefined()
  })

  prop("serialise then parse gives the same list", [fc.array(member, { maxLength: 4 })], ([members]) => {
    const text = sf.serializeList(members)
    expect(text).toBeDefined()
    expect(sf.parseList(text!)).toEqual(members)
  })

  prop("an item parsed from its serialisation serialises to the same text", [anItem], ([i]) => {
    const text = sf.serializeItem(i)!
    expect(sf.serializeItem(sf.parseItem(text)!)).toBe(text)
  })

  prop("parsing is total: any text gives a list or undefined, never a throw", [fc.string()], ([s]) => {
    const parsed = sf.parseList(s)
    expect(parsed === undefined || Array.isArray(parsed)).toBe(true)
    expect(sf.parseItem(s) === undefined || sf.parseItem(s)!._tag === "Item").toBe(true)
  })

  prop("sf-strings round trip through serializeString and parseSfString", [text(printable)], ([s]) => {
    expect(sf.parseSfString(sf.serializeString(s)!)).toBe(s)
  })

  it("reads idempotency keys as sf-strings or bare tokens within the length", () => {
    expect(sf.parseIdempotencyKey("\"a b\"", 255)).toBe("a b")
    expect(sf.parseIdempotencyKey(" 8e03978e-40d5 ", 255)).toBe("8e03978e-40d5")
    expect(sf.parseIdempotencyKey("abcd", 3)).toBeUndefined()
    expect(sf.parseIdempotencyKey("\"\"", 255)).toBeUndefined()
    expect(sf.parseIdempotencyKey("a b", 255)).toBeUndefined()
    expect(sf.parseIdempotencyKey("\"a\";p", 255)).toBeUndefined()
  })

  prop("an accepted idempotency key is non-empty printable ASCII within maxLength", [
    fc.string(),
    fc.integer({ min: 1, max: 20 })
  ], ([s, max]) => {
    const k = sf.parseIdempotencyKey(s, max)
    if (k !== undefined) {
      expect(k.length).toBeGreaterThan(0)
      expect(k.length).toBeLessThanOrEqual(max)
      expect(/^[\x20-\x7e]+$/.test(k)).toBe(true)
    }
  })

  it("clamps numbers to non-negative sf-integers", () => {
    expect(sf.clampInteger(Number.NaN, Math.floor)).toBe(0)
    expect(sf.clampInteger(-3, Math.floor)).toBe(0)
    expect(sf.clampInteger(1.2, Math.ceil)).toBe(2)
    expect(sf.clampInteger(Infinity, Math.floor)).toBe(sf.maxInteger)
  })
})
