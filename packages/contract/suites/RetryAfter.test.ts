import { fc, prop, TestClock } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Option } from "effect"
import { RetryAfter } from "effect-resilience"

const now = Date.UTC(1999, 11, 31, 23, 59, 0) // Fri, 31 Dec 1999 23:59:00 GMT

const millis = (value: string, at = now): number | undefined =>
  Option.getOrUndefined(Option.map(RetryAfter.parse(value, at), Duration.toMillis))

const YEAR_0 = -62167219200000 // 0000-01-01T00:00:00Z
const YEAR_9999_END = 253402300799000 // 9999-12-31T23:59:59Z

describe("RetryAfter", () => {
  describe("delay-seconds", () => {
    it("RFC 9110 example: Retry-After: 120", () => {
      expect(RetryAfter.parse("120", now)).toEqual(Option.some(Duration.seconds(120)))
    })

    it("zero, leading zeros and surrounding spaces/tabs", () => {
      expect(millis("0")).toBe(0)
      expect(millis("007")).toBe(7000)
      expect(millis("000")).toBe(0)
      expect(millis(" \t120\t ")).toBe(120_000)
    })

    it("does not depend on now", () => {
      expect(millis("5", 0)).toBe(5000)
      expect(millis("5", -1e15)).toBe(5000)
    })

    it("saturates past maxDelaySeconds to Duration.infinity", () => {
      const max = RetryAfter.maxDelaySeconds
      expect(max).toBe(9007199254740)
      expect(millis(String(max))).toBe(max * 1000)
      expect(RetryAfter.parse(String(max + 1), now)).toEqual(Option.some(Duration.infinity))
      expect(RetryAfter.parse("9".repeat(400), now)).toEqual(Option.some(Duration.infinity))
      expect(millis("0".repeat(400) + "1")).toBe(1000)
    })
  })

  describe("HTTP-date", () => {
    it("RFC 9110 example date: Fri, 31 Dec 1999 23:59:59 GMT is 59 s after now", () => {
      expect(millis("Fri, 31 Dec 1999 23:59:59 GMT")).toBe(59_000)
    })

    it("a past or equal date is zero", () => {
      expect(millis("Sun, 06 Nov 1994 08:49:37 GMT")).toBe(0)
      expect(millis("Fri, 31 Dec 1999 23:59:00 GMT")).toBe(0)
      expect(millis("Fri, 31 Dec 1999 23:59:01 GMT")).toBe(1000)
    })

    it("reads the RFC example date and leap days", () => {
      expect(RetryAfter.parseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT")).toEqual(Option.some(784111777000))
      expect(RetryAfter.parseHttpDate("Tue, 29 Feb 2000 00:00:00 GMT")).toEqual(Option.some(Date.UTC(2000, 1, 29)))
      expect(RetryAfter.parseHttpDate("Thu, 29 Feb 2024 12:00:00 GMT")).toEqual(Option.some(Date.UTC(2024, 1, 29, 12)))
      expect(RetryAfter.parseHttpDate("Sat, 01 Jan 0000 00:00:00 GMT")).toEqual(Option.some(YEAR_0))
      expect(RetryAfter.parseHttpDate("Fri, 31 Dec 9999 23:59:59 GMT")).toEqual(Option.some(YEAR_9999_END))
      expect(RetryAfter.parseHttpDate("\t Sun, 06 Nov 1994 08:49:37 GMT  ")).toEqual(Option.some(784111777000))
    })

    it("a leap second counts as the next second", () => {
      expect(RetryAfter.parseHttpDate("Sat, 31 Dec 2016 23:59:60 GMT")).toEqual(Option.some(Date.UTC(2017, 0, 1)))
    })

    it.effect("with Clock.currentTimeMillis under TestClock", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(now)
        const wait = yield* Clock.currentTimeMillis.pipe(
          Effect.map((t) => RetryAfter.parse("Sat, 01 Jan 2000 00:00:00 GMT", t))
        )
        expect(wait).toEqual(Option.some(Duration.seconds(60)))
      }))
  })

  describe("rejected values (none)", () => {
    const vectors = [
      "-1",
      "+1",
      "1.0",
      "1.",
      "1e3",
      "1_000",
      "1,000",
      "1 2",
      " ",
      "",
      "\t",
      "0x10",
      "0b1",
      "Infinity",
      "NaN",
      "abc",
      "120s",
      "\u0661\u0662", // Arabic-Indic digits
      "１２", // fullwidth digits
      "12\u00a0", // NBSP is not OWS
      "\n12",
      "12\r\n",
      // obsolete formats, refused on purpose
      "Sunday, 06-Nov-94 08:49:37 GMT",
      "Sun Nov  6 08:49:37 1994",
      // impossible or mis-named dates
      "Mon, 06 Nov 1994 08:49:37 GMT", // was a Sunday
      "Thu, 29 Feb 2001 00:00:00 GMT", // not a leap year (a rolling parser would say 1 Mar, a Thursday)
      "Thu, 29 Feb 1900 00:00:00 GMT", // not a leap year either
      "Sat, 31 Apr 2000 00:00:00 GMT",
      "Sun, 00 Nov 1994 08:49:37 GMT",
      "Sun, 32 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 24:00:00 GMT",
      "Sun, 06 Nov 1994 08:60:00 GMT",
      "Sun, 06 Nov 1994 08:49:61 GMT",
      // near misses of the grammar
      "sun, 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 08:49:37 gmt",
      "Sun, 06 Nov 1994 08:49:37 UTC",
      "Sun, 06 Nov 1994 08:49:37 +0000",
      "Sun, 06 Nov 1994 08:49:37",
      "Sun, 6 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 94 08:49:37 GMT",
      "Sun,  06 Nov 1994 08:49:37 GMT",
      "Sun 06 Nov 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 8:49:37 GMT",
      "Sun, 06 Nov 1994 08:49:37 GMT,",
      "Sun, 06 Nov 1994 08:49:37 GMT 120",
      "1994-11-06T08:49:37Z"
    ]
    for (const v of vectors) {
      it(`${JSON.stringify(v)}`, () => {
        expect(RetryAfter.parse(v, now)).toEqual(Option.none())
      })
    }

    it("a non-finite now gives none for either form", () => {
      for (const t of [Number.NaN, Infinity, -Infinity]) {
        expect(RetryAfter.parse("120", t)).toEqual(Option.none())
        expect(RetryAfter.parse("Fri, 31 Dec 1999 23:59:59 GMT", t)).toEqual(Option.none())
      }
    })

    it("non-string input from untyped callers gives none", () => {
      for (const v of [undefined, null, 120, {}, ["120"]]) {
        expect(RetryAfter.parse(v as any, now)).toEqual(Option.none())
        expect(RetryAfter.parseHttpDate(v as any)).toEqual(Option.none())
      }
    })
  })

  describe("format", () => {
    it("whole seconds, rounded up, never negative", () => {
      expect(RetryAfter.format("1500 millis")).toBe("2")
      expect(RetryAfter.format("2 seconds")).toBe("2")
      expect(RetryAfter.format(0)).toBe("0")
      expect(RetryAfter.format(Duration.nanos(BigInt(1)))).toBe("1")
      expect(RetryAfter.format(Duration.millis(-5))).toBe("0")
      expect(RetryAfter.format(Duration.infinity)).toBe(String(RetryAfter.maxDelaySeconds + 1))
      expect(RetryAfter.parse(RetryAfter.format(Duration.infinity), now)).toEqual(Option.some(Duration.infinity))
    })
  })

  describe("properties", () => {
    const headerish = fc.string({
      unit: fc.constantFrom(..."0123456789 \t,:+-.eGMTSunMonDecNov".split(""), "GMT", "Sun, ", " Nov ", "1994")
    })
    const anyNow = fc.oneof(fc.double(), fc.integer(), fc.constantFrom(now, Number.NaN, Infinity))

    prop(
      "never throws; a result is a non-negative duration",
      [fc.oneof(fc.string(), fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }), headerish), anyNow],
      ([value, t]) => {
        const out = RetryAfter.parse(value, t)
        if (Option.isSome(out)) expect(Duration.toMillis(out.value)).toBeGreaterThanOrEqual(0)
        RetryAfter.parseHttpDate(value)
      },
      { fastCheck: { numRuns: 2000 } }
    )

    prop(
      "delay-seconds: digits with any leading zeros and OWS read exactly",
      [fc.integer({ min: 0, max: RetryAfter.maxDelaySeconds }), fc.nat(5), fc.stringMatching(/^[ \t]{0,3}$/)],
      ([n, zeros, ows]) => {
        const value = `${ows}${"0".repeat(zeros)}${n}${ows}`
        expect(RetryAfter.parse(value, now)).toEqual(Option.some(Duration.seconds(n)))
      }
    )

    prop(
      "delay-seconds: values past the maximum are infinity",
      [fc.bigInt({ min: BigInt(RetryAfter.maxDelaySeconds) + BigInt(1), max: BigInt(10) ** BigInt(40) })],
      ([n]) => {
        expect(RetryAfter.parse(String(n), now)).toEqual(Option.some(Duration.infinity))
      }
    )

    const secondAligned = fc.integer({ min: YEAR_0 / 1000, max: YEAR_9999_END / 1000 }).map((s) => s * 1000)

    prop("IMF-fixdate round trip with Date.prototype.toUTCString", [secondAligned], ([at]) => {
      const text = new Date(at).toUTCString()
      expect(RetryAfter.parseHttpDate(text)).toEqual(Option.some(at))
    })

    prop("a date gives max(0, date - now)", [secondAligned, fc.integer({ min: YEAR_0, max: YEAR_9999_END })], (
      [at, t]
    ) => {
      expect(millis(new Date(at).toUTCString(), t)).toBe(Math.max(0, at - t))
    })

    prop(
      "only the right day name is accepted",
      [secondAligned, fc.constantFrom("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")],
      ([at, day]) => {
        const text = new Date(at).toUTCString()
        const renamed = `${day}${text.slice(3)}`
        expect(Option.isSome(RetryAfter.parseHttpDate(renamed))).toBe(renamed === text)
      }
    )

    prop("format then parse gives back whole seconds", [fc.integer({ min: 0, max: RetryAfter.maxDelaySeconds })], (
      [n]
    ) => {
      expect(RetryAfter.parse(RetryAfter.format(Duration.seconds(n)), now)).toEqual(Option.some(Duration.seconds(n)))
    })

    const parsedSeconds = (text: string): number => Duration.toSeconds(Option.getOrThrow(RetryAfter.parse(text, now)))

    prop("format rounds milliseconds up by less than a second", [fc.integer({ min: 0, max: 1e15 })], ([ms]) => {
      const back = parsedSeconds(RetryAfter.format(Duration.millis(ms))) * 1000
      expect(back).toBeGreaterThanOrEqual(ms)
      expect(back - ms).toBeLessThan(1000)
    })

    prop(
      "format rounds nanoseconds up by less than a second",
      [fc.bigInt({ min: BigInt(0), max: BigInt(10) ** BigInt(21) })],
      ([nanos]) => {
        const back = BigInt(parsedSeconds(RetryAfter.format(Duration.nanos(nanos)))) * BigInt(1e9)
        expect(back >= nanos).toBe(true)
        expect(back - nanos < BigInt(1e9)).toBe(true)
      }
    )
  })

  it("sanity: the generators cover year 0000 to 9999", () => {
    expect(new Date(YEAR_0).toUTCString()).toBe("Sat, 01 Jan 0000 00:00:00 GMT")
    expect(new Date(YEAR_9999_END).toUTCString()).toBe("Fri, 31 Dec 9999 23:59:59 GMT")
  })
})
