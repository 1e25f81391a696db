import { fc, prop } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import { RateLimitHeaders, StructuredFields } from "effect-resilience"

const MAX = 999_999_999_999_999

describe("RateLimitHeaders", () => {
  describe("draft-11 examples", () => {
    it("RateLimit-Policy: two policies", () => {
      const value = "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400"
      const policies = [{ name: "burst", quota: 100, window: 60 }, { name: "daily", quota: 1000, window: 86400 }]
      expect(RateLimitHeaders.formatPolicy(policies)).toBe(value)
      expect(RateLimitHeaders.parsePolicy(value)).toEqual(Option.some(policies))
    })

    it("RateLimit: one service limit", () => {
      const value = "\"default\";r=50;t=30"
      expect(RateLimitHeaders.formatRateLimit({ name: "default", remaining: 50, reset: 30 })).toBe(value)
      expect(RateLimitHeaders.parseRateLimit(value)).toEqual(
        Option.some([{ name: "default", remaining: 50, reset: 30 }])
      )
    })

    it("header names", () => {
      expect(RateLimitHeaders.policyHeader).toBe("RateLimit-Policy")
      expect(RateLimitHeaders.rateLimitHeader).toBe("RateLimit")
    })
  })

  describe("formatting", () => {
    it("escapes quotes and backslashes in names", () => {
      const value = RateLimitHeaders.formatPolicy({ name: "a\"b\\c", quota: 1, window: 2 })
      expect(value).toBe("\"a\\\"b\\\\c\";q=1;w=2")
      expect(RateLimitHeaders.parsePolicy(value)).toEqual(Option.some([{ name: "a\"b\\c", quota: 1, window: 2 }]))
    })

    it("replaces characters an sf-string cannot carry with ?", () => {
      expect(RateLimitHeaders.isValidName("tier 1 ~")).toBe(true)
      expect(RateLimitHeaders.isValidName("café")).toBe(false)
      expect(RateLimitHeaders.isValidName("a\nb")).toBe(false)
      expect(RateLimitHeaders.formatRateLimit({ name: "café\n😀", remaining: 1, reset: 1 })).toBe("\"caf???\";r=1;t=1")
    })

    it("clamps numbers: quota/remaining down, window/reset up, within [0, 10^15 - 1]", () => {
      expect(RateLimitHeaders.formatPolicy({ name: "p", quota: 1.9, window: 1.1 })).toBe("\"p\";q=1;w=2")
      expect(RateLimitHeaders.formatRateLimit({ name: "p", remaining: 0.5, reset: 0.1 })).toBe("\"p\";r=0;t=1")
      expect(RateLimitHeaders.formatRateLimit({ name: "p", remaining: -3, reset: -0.5 })).toBe("\"p\";r=0;t=0")
      expect(RateLimitHeaders.formatRateLimit({ name: "p", remaining: Number.NaN, reset: Number.NaN }))
        .toBe("\"p\";r=0;t=0")
      expect(RateLimitHeaders.formatPolicy({ name: "p", quota: Infinity, window: 1e20 })).toBe(
        `"p";q=${MAX};w=${MAX}`
      )
    })

    it("optional window and reset are omitted; an empty list is an empty string", () => {
      expect(RateLimitHeaders.formatPolicy({ name: "p", quota: 5 })).toBe("\"p\";q=5")
      expect(RateLimitHeaders.formatRateLimit({ name: "p", remaining: 5 })).toBe("\"p\";r=5")
      expect(RateLimitHeaders.formatPolicy([])).toBe("")
      expect(RateLimitHeaders.parsePolicy("")).toEqual(Option.none())
    })
  })

  describe("parsing", () => {
    it("accepts tokens as names, OWS around commas, SP around the value", () => {
      expect(RateLimitHeaders.parsePolicy("  burst;q=100;w=60 ,\t\"daily\";q=1000  ")).toEqual(
        Option.some([{ name: "burst", quota: 100, window: 60 }, { name: "daily", quota: 1000 }])
      )
    })

    it("ignores unknown parameters (qu, pk, vendor) and lets a repeated key overwrite", () => {
      expect(
        RateLimitHeaders.parsePolicy("\"a\";q=10;qu=\"request\";pk=:cHsdsRa894==:;x-vendor=?1;w=5;q=20")
      ).toEqual(Option.some([{ name: "a", quota: 20, window: 5 }]))
      expect(RateLimitHeaders.parseRateLimit("\"a\";r=1;pk=:AAE=:;t=2;foo=1.5")).toEqual(
        Option.some([{ name: "a", remaining: 1, reset: 2 }])
      )
    })

    it("w and t are optional; q and r are required", () => {
      expect(RateLimitHeaders.parsePolicy("\"a\";q=5")).toEqual(Option.some([{ name: "a", quota: 5 }]))
      expect(RateLimitHeaders.parseRateLimit("\"a\";r=5")).toEqual(Option.some([{ name: "a", remaining: 5 }]))
      expect(RateLimitHeaders.parsePolicy("\"a\";w=5")).toEqual(Option.none())
      expect(RateLimitHeaders.parseRateLimit("\"a\";t=5")).toEqual(Option.none())
    })

    it("reads the largest integer and -0", () => {
      expect(RateLimitHeaders.parseRateLimit(`"a";r=${MAX};t=-0`)).toEqual(
        Option.some([{ name: "a", remaining: MAX, reset: 0 }])
      )
    })

    const malformedPolicies = [
      "",
      "   ",
      ",",
      "\"a\"",
      "\"a\";q=-1",
      "\"a\";q=1.5",
      "\"a\";q=\"1\"",
      "\"a\";q",
      "\"a\";q=?1",
      "\"a\";q=1;w=-5",
      "\"a\";q=1;w=2.0",
      "\"a\";q=1000000000000000", // 16 digits
      "\"a\";Q=1",
      "\"a\" ;q=1",
      "\"a\";q =1",
      "\"a\";q= 1",
      "100;w=60", // the pre-08 syntax
      "(\"a\" \"b\");q=1",
      ":YQ==:;q=1",
      "?1;q=1",
      "@1;q=1",
      "\"a\";q=1,",
      "\"a\";q=1,,\"b\";q=2",
      "\"a\";q=1 \"b\";q=2",
      "\"unterminated;q=1",
      "\"a\\x\";q=1",
      "\"a\tb\";q=1",
      "\"é\";q=1",
      "é;q=1",
      "\"a\";q=1\n",
      "\"a\";q=1;"
    ]

    it("SP after the parameter separator is allowed", () => {
      expect(RateLimitHeaders.parsePolicy("\"a\"; q=1")).toEqual(Option.some([{ name: "a", quota: 1 }]))
    })

    for (const value of malformedPolicies) {
      it(`RateLimit-Policy ${JSON.stringify(value)} → none`, () => {
        expect(RateLimitHeaders.parsePolicy(value)).toEqual(Option.none())
      })
    }

    it("RateLimit rejects the same malformed shapes", () => {
      for (const value of ["", "\"a\"", "\"a\";r=-1", "\"a\";r=1;t=-1", "\"a\";r=1.0", "50;t=30", "\"a\";r=1,"]) {
        expect(RateLimitHeaders.parseRateLimit(value), value).toEqual(Option.none())
      }
    })

    it("non-string input from untyped callers gives none", () => {
      for (const v of [undefined, null, 1, {}]) {
        expect(RateLimitHeaders.parsePolicy(v as any)).toEqual(Option.none())
        expect(RateLimitHeaders.parseRateLimit(v as any)).toEqual(Option.none())
      }
    })
  })

  describe("properties", () => {
    const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) })
    const integer = fc.oneof(fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: MAX }))
    const policy = fc.record({ name: printable, quota: integer, window: integer }, { requiredKeys: ["name", "quota"] })
    const limit = fc.record({ name: printable, remaining: integer, reset: integer }, {
      requiredKeys: ["name", "remaining"]
    })
    // the characters Structured Fields care about, so the fuzzer reaches deep into the parser
    const sfish = fc.string({
      unit: fc.constantFrom(
        ..."\";,=() \t:?@%*-._/\\019aqrtwQ".split(""),
        "\"a\"",
        ";q=",
        ";r=1",
        ";t=",
        ";w=60",
        "%\"",
        "%c3%a9",
        "é",
        "😀",
        "\u0000"
      )
    })
    const anyString = fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }), sfish)

    prop("parsers never throw", [anyString], ([value]) => {
      RateLimitHeaders.parsePolicy(value)
      RateLimitHeaders.parseRateLimit(value)
    }, { fastCheck: { numRuns: 3000 } })

    prop("formatters never throw", [
      fc.array(fc.record({ name: fc.string({ unit: "binary" }), quota: fc.double(), window: fc.double() }))
    ], ([policies]) => {
      const value = RateLimitHeaders.formatPolicy(policies)
      if (policies.length > 0) expect(Option.isSome(RateLimitHeaders.parsePolicy(value))).toBe(true)
    })

    prop("RateLimit-Policy round trip", [fc.array(policy, { minLength: 1, maxLength: 5 })], ([policies]) => {
      expect(RateLimitHeaders.parsePolicy(RateLimitHeaders.formatPolicy(policies))).toEqual(Option.some(policies))
    })

    prop("RateLimit round trip", [fc.array(limit, { minLength: 1, maxLength: 5 })], ([limits]) => {
      expect(RateLimitHeaders.parseRateLimit(RateLimitHeaders.formatRateLimit(limits))).toEqual(Option.some(limits))
    })

    // valid fields a server other than ours might send: token names, extension parameters of every bare
    // type, optional SP after ";" and OWS around ","
    const token = fc.tuple(
      fc.constantFrom(..."abcXYZ*".split("")),
      fc.string({ unit: fc.constantFrom(..."az09!#$%&'*+-.^_`|~:/".split("")) })
    ).map(([a, b]) => a + b)
    const extension = fc.tuple(
      fc.constantFrom("qu", "pk", "x-vendor", "*k", "q2", "ww"),
      fc.constantFrom(
        "",
        "=1",
        "=-7",
        "=1.5",
        "=?0",
        "=?1",
        "=:AAE=:",
        "=\"request\"",
        "=tok",
        "=@1700000000",
        "=%\"%c3%a9\""
      )
    ).map(([k, v]) => `${k}${v}`)
    const member = fc.record({
      name: fc.oneof(printable, token),
      quota: integer,
      window: fc.option(integer, { nil: undefined }),
      asToken: fc.boolean(),
      extras: fc.array(extension, { maxLength: 3 }),
      sp: fc.constantFrom("", " ", "  ")
    })
    const field = fc.tuple(
      fc.array(member, { minLength: 1, maxLength: 4 }),
      fc.constantFrom(",", ", ", " ,\t", "\t,  ")
    )

    prop("reads valid fields in every shape the grammar allows", [field], ([[members, comma]]) => {
      const isToken = (s: string) => /^[a-zA-Z*][a-zA-Z0-9!#$%&'*+\-.^_`|~:/]*$/.test(s)
      const text = members.map((m) => {
        const name = m.asToken && isToken(m.name) ? m.name : Option.getOrThrow(StructuredFields.formatSfString(m.name))
        const params = [`q=${m.quota}`, ...(m.window === undefined ? [] : [`w=${m.window}`]), ...m.extras]
        return name + params.map((p) => `;${m.sp}${p}`).join("")
      }).join(comma)
      const expected = members.map((m) =>
        m.window === undefined ? { name: m.name, quota: m.quota } : { name: m.name, quota: m.quota, window: m.window }
      )
      expect(RateLimitHeaders.parsePolicy(` ${text} `)).toEqual(Option.some(expected))
    })

    prop("whatever parses, formats back to a value with the same meaning", [anyString], ([value]) => {
      const parsed = RateLimitHeaders.parsePolicy(value)
      if (Option.isSome(parsed)) {
        expect(RateLimitHeaders.parsePolicy(RateLimitHeaders.formatPolicy(parsed.value))).toEqual(parsed)
      }
    }, { fastCheck: { numRuns: 2000 } })
  })
})
