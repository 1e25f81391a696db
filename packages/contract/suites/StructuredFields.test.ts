import { fc, prop } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import { StructuredFields } from "effect-resilience"

const key = (value: string, maxLength?: number) =>
  Option.getOrUndefined(
    StructuredFields.parseIdempotencyKey(value, maxLength === undefined ? undefined : { maxLength })
  )

describe("StructuredFields", () => {
  describe("parseSfString / formatSfString", () => {
    it("reads one sf-string with escapes, surrounded by optional SP", () => {
      expect(StructuredFields.parseSfString("\"abc\"")).toEqual(Option.some("abc"))
      expect(StructuredFields.parseSfString("  \"a \\\"b\\\" \\\\c\" ")).toEqual(Option.some("a \"b\" \\c"))
      expect(StructuredFields.parseSfString("\"\"")).toEqual(Option.some(""))
    })

    it("rejects everything else", () => {
      for (
        const v of [
          "abc",
          "\"abc",
          "\"a\\b\"",
          "\"a\";p=1",
          "\"a\" \"b\"",
          "\"a\",\"b\"",
          "\"é\"",
          "\"a\u0000\"",
          "\"a\"\t",
          "1",
          "?1",
          ""
        ]
      ) {
        expect(StructuredFields.parseSfString(v), JSON.stringify(v)).toEqual(Option.none())
      }
    })

    it("formats with escapes; non-printable characters give none", () => {
      expect(StructuredFields.formatSfString("a\"b\\c")).toEqual(Option.some("\"a\\\"b\\\\c\""))
      expect(StructuredFields.formatSfString("")).toEqual(Option.some("\"\""))
      expect(StructuredFields.formatSfString("tab\t")).toEqual(Option.none())
      expect(StructuredFields.formatSfString("ü")).toEqual(Option.none())
    })
  })

  describe("parseIdempotencyKey", () => {
    it("accepts an sf-string, with escapes and inner spaces", () => {
      expect(key("\"abc\"")).toBe("abc")
      expect(key("\"a\\\"b\\\\c\"")).toBe("a\"b\\c")
      expect(key("\"order 42\"")).toBe("order 42")
      expect(key("\t \"abc\" \t")).toBe("abc")
    })

    it("accepts a bare token, including one starting with a digit (a UUID)", () => {
      expect(key("abc")).toBe("abc")
      expect(key("8e03978e-40d5-43e8-bc93-6894a57f9324")).toBe("8e03978e-40d5-43e8-bc93-6894a57f9324")
      expect(key("order:42/retry_1.x~")).toBe("order:42/retry_1.x~")
      expect(key("  abc\t")).toBe("abc")
    })

    it("rejects empty keys", () => {
      for (const v of ["", "\"\"", "   ", "\t"]) expect(key(v), JSON.stringify(v)).toBeUndefined()
    })

    it("enforces the length limit (default 255, after unescaping)", () => {
      expect(key("a".repeat(255))).toBe("a".repeat(255))
      expect(key("a".repeat(256))).toBeUndefined()
      expect(key(`"${"a".repeat(255)}"`)).toBe("a".repeat(255))
      expect(key(`"${"a".repeat(256)}"`)).toBeUndefined()
      expect(key(`"${"\\\"".repeat(255)}"`)).toBe("\"".repeat(255))
      expect(key("abcdefghij", 10)).toBe("abcdefghij")
      expect(key("abcdefghijk", 10)).toBeUndefined()
      expect(key("a", Number.NaN)).toBeUndefined()
    })

    it("rejects control characters, non-ASCII and malformed forms", () => {
      for (
        const v of [
          "\"a\u0001b\"",
          "a\u0000",
          "\"a\nb\"",
          "a\tb",
          "a\u007fb",
          "\"a\u007f\"",
          "\"é\"",
          "é",
          "abc\u00a0",
          "ключ",
          "😀",
          "a b",
          "abc, def",
          "\"abc\";x=1",
          "\"abc",
          "abc\"",
          "\"a\\qb\"",
          "\"abc\"def",
          "(abc)",
          "a=b",
          "a;b"
        ]
      ) {
        expect(key(v), JSON.stringify(v)).toBeUndefined()
      }
    })

    it("non-string input from untyped callers gives none", () => {
      for (const v of [undefined, null, 42]) {
        expect(StructuredFields.parseIdempotencyKey(v as any)).toEqual(Option.none())
        expect(StructuredFields.parseSfString(v as any)).toEqual(Option.none())
        expect(StructuredFields.formatSfString(v as any)).toEqual(Option.none())
      }
    })
  })

  describe("properties", () => {
    const printable = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength: 255
    })
    const tchars = fc.string({
      unit: fc.constantFrom(..."!#$%&'*+-.^_`|~:/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
      minLength: 1,
      maxLength: 255
    })
    const anyString = fc.oneof(
      fc.string(),
      fc.string({ unit: "binary" }),
      fc.string({ unit: "grapheme" }),
      fc.string({ unit: fc.constantFrom("\"", "\\", ";", ",", " ", "\t", "a", "1", "=", "é", "\u0000") })
    )

    prop("parsers never throw", [anyString, fc.option(fc.integer(), { nil: undefined })], ([value, maxLength]) => {
      StructuredFields.parseSfString(value)
      StructuredFields.formatSfString(value)
      const parsed = StructuredFields.parseIdempotencyKey(value, { maxLength })
      if (Option.isSome(parsed)) {
        expect(parsed.value.length).toBeGreaterThan(0)
        expect(parsed.value.length).toBeLessThanOrEqual(maxLength ?? 255)
        expect(parsed.value).toMatch(/^[\x20-\x7e]+$/)
      }
    }, { fastCheck: { numRuns: 3000 } })

    prop("any printable key survives formatSfString → parseIdempotencyKey", [printable], ([k]) => {
      const quoted = Option.getOrThrow(StructuredFields.formatSfString(k))
      expect(StructuredFields.parseSfString(quoted)).toEqual(Option.some(k))
      expect(StructuredFields.parseIdempotencyKey(quoted)).toEqual(Option.some(k))
    })

    prop("a bare token is its own key", [tchars], ([k]) => {
      expect(StructuredFields.parseIdempotencyKey(k)).toEqual(Option.some(k))
    })
  })
})
