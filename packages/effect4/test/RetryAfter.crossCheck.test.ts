/**
 * `RetryAfter` against Effect 4's own `Retry-After` functions (`effect/http` Headers: `parseRetryAfter`,
 * `retryAfterDelay`, `retryAfterDuration`, `formatRetryAfter`) on many inputs. They agree wherever both accept a
 * value; where they differ, it is one of the differences `RetryAfter`'s documentation decides on purpose, and the
 * test names which:
 *
 * - obsolete date formats (RFC 850, asctime): Effect reads them, we refuse them;
 * - case: Effect reads day and month names and `GMT` in any case, we only as the grammar writes them;
 * - the day name: Effect does not check it against the date, we refuse a date whose day name is wrong;
 * - whitespace: we trim spaces and tabs only (OWS), Effect any JavaScript whitespace (`\n`, `\r`, NBSP, …);
 * - huge delays: past `maxDelaySeconds` we saturate to `Duration.infinity`, Effect keeps the exact count;
 * - a time `now` that is not finite, and non-string input: we answer `none`, Effect computes (or throws).
 *
 * Anything else that parses on one side only fails the test.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Option, Result } from "effect"
import { Headers } from "effect/http"
import * as fc from "fast-check"
import { RetryAfter } from "../src/index.js"
import { prop } from "./support/prop.js"

const now = Date.UTC(1999, 11, 31, 23, 59, 0)
const MAX = RetryAfter.maxDelaySeconds

const ours = (value: string, at = now) => Option.getOrUndefined(RetryAfter.parse(value, at))
const theirs = (value: string, at = now) => {
  const parsed = Headers.parseRetryAfter(value)
  return Result.isSuccess(parsed) ? Headers.retryAfterDelay(parsed.success, at) : undefined
}

type Difference = "obsolete" | "case" | "day-name" | "whitespace"

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
const IMF =
  /^(Sun|Mon|Tue|Wed|Thu|Fri|Sat), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/
const OBSOLETE = [
  /^(monday|tuesday|wednesday|thursday|friday|saturday|sunday), \d{2}-[a-z]{3}-\d{2} \d{2}:\d{2}:\d{2} gmt$/i,
  /^(mon|tue|wed|thu|fri|sat|sun) [a-z]{3} ( \d|\d{2}) \d{2}:\d{2}:\d{2} \d{4}$/i
]

/** Which documented difference explains a value Effect reads and we refuse; `undefined`: none does. */
const difference = (value: string): Difference | undefined => {
  const ows = value.replace(/^[ \t]+|[ \t]+$/g, "")
  if (ows !== value.trim()) return "whitespace"
  if (OBSOLETE.some((format) => format.test(ows))) return "obsolete"
  if (!IMF.test(ows)) return IMF.test(canonicalCase(ows)) ? "case" : undefined
  const millis = Date.parse(ows)
  return DAYS[new Date(millis).getUTCDay()] !== ows.slice(0, 3) ? "day-name" : undefined
}

/** An IMF-fixdate's names in the grammar's case (`sun` → `Sun`, `NOV` → `Nov`, `gmt` → `GMT`). */
const canonicalCase = (value: string) =>
  value.replace(
    /[a-z]+/gi,
    (word) =>
      word.toLowerCase() === "gmt"
        ? "GMT"
        : word.length === 3
        ? word[0]!.toUpperCase() + word.slice(1).toLowerCase()
        : word
  )

/** Compares one value on both sides: they agree, or the difference is a documented one (returned). */
const compare = (value: string, at = now): "agree" | Difference | "ours-saturates" => {
  const a = ours(value, at)
  const b = theirs(value, at)
  if (a !== undefined && b !== undefined) {
    if (Duration.isFinite(a)) {
      expect(Duration.toMillis(b), JSON.stringify(value)).toBe(Duration.toMillis(a))
      return "agree"
    }
    // saturated: Effect counts the seconds exactly, all of them past our maximum
    expect(Duration.toNanosUnsafe(b) > BigInt(MAX) * BigInt(1e9), JSON.stringify(value)).toBe(true)
    return "ours-saturates"
  }
  // we never accept what Effect refuses
  expect(a, `${JSON.stringify(value)}: accepted by RetryAfter only`).toBeUndefined()
  if (b === undefined) return "agree"
  const why = difference(value)
  expect(why, `${JSON.stringify(value)}: accepted by Effect only, and no documented difference explains it`)
    .toBeDefined()
  return why!
}

const fixed = [
  "120",
  "0",
  "007",
  " \t120\t ",
  String(MAX),
  String(MAX + 1),
  "9".repeat(40),
  "-1",
  "+1",
  "1.0",
  "1e3",
  "0x10",
  "",
  " ",
  "Infinity",
  "\u0661\u0662",
  "１２",
  "12\u00a0",
  "\n12",
  "12\r\n",
  "\v120",
  "Fri, 31 Dec 1999 23:59:59 GMT",
  "Sun, 06 Nov 1994 08:49:37 GMT",
  "Sat, 31 Dec 2016 23:59:60 GMT",
  "Sat, 01 Jan 0000 00:00:00 GMT",
  "Fri, 31 Dec 9999 23:59:59 GMT",
  "\r\nFri, 31 Dec 1999 23:59:59 GMT",
  "Sunday, 06-Nov-94 08:49:37 GMT",
  "Friday, 31-Dec-99 23:59:59 GMT",
  "Sun Nov  6 08:49:37 1994",
  "Fri Dec 31 23:59:59 1999",
  "sun, 06 Nov 1994 08:49:37 GMT",
  "Sun, 06 nov 1994 08:49:37 GMT",
  "Sun, 06 Nov 1994 08:49:37 gmt",
  "FRI, 31 DEC 1999 23:59:59 GMT",
  "Mon, 06 Nov 1994 08:49:37 GMT",
  "Thu, 29 Feb 2001 00:00:00 GMT",
  "Sat, 31 Apr 2000 00:00:00 GMT",
  "Sun, 06 Nov 1994 24:00:00 GMT",
  "Sun, 06 Nov 1994 08:60:00 GMT",
  "Sun, 06 Nov 1994 08:49:61 GMT",
  "Sun, 06 Nov 1994 08:49:37 UTC",
  "Sun, 6 Nov 1994 08:49:37 GMT",
  "Sun, 06 Nov 94 08:49:37 GMT",
  "Sun 06 Nov 1994 08:49:37 GMT",
  "1994-11-06T08:49:37Z"
]

describe("RetryAfter against Effect 4's Headers.parseRetryAfter", () => {
  it("agrees on the fixed values, and each difference is a documented one", () => {
    const seen = new Map<string, Array<string>>()
    for (const value of fixed) {
      const outcome = compare(value)
      seen.set(outcome, [...(seen.get(outcome) ?? []), value])
    }
    // every documented difference shows up at least once: none of them is assumed without being seen
    for (const kind of ["agree", "ours-saturates", "obsolete", "case", "day-name", "whitespace"]) {
      expect(seen.get(kind), kind).toBeDefined()
    }
    expect(seen.get("obsolete")).toEqual([
      "Sunday, 06-Nov-94 08:49:37 GMT",
      "Friday, 31-Dec-99 23:59:59 GMT",
      "Sun Nov  6 08:49:37 1994",
      "Fri Dec 31 23:59:59 1999"
    ])
    expect(seen.get("day-name")).toEqual(["Mon, 06 Nov 1994 08:49:37 GMT"])
  })

  const secondAligned = fc.integer({ min: -62167219200, max: 253402300799 }).map((s) => s * 1000)
  const anyNow = fc.integer({ min: -62167219200000, max: 253402300799000 })

  prop("IMF-fixdates: the same delay from any now", [secondAligned, anyNow], ([at, t]) => {
    expect(compare(new Date(at).toUTCString(), t)).toBe("agree")
  }, { fastCheck: { numRuns: 1000 } })

  prop("delay-seconds: the same delay up to maxDelaySeconds, saturated past it", [
    fc.oneof(fc.integer({ min: 0, max: MAX }), fc.bigInt({ min: BigInt(0), max: BigInt(10) ** BigInt(30) })),
    fc.nat(4),
    fc.constantFrom("", " ", "\t", " \t ")
  ], ([n, zeros, ows]) => {
    const outcome = compare(`${ows}${"0".repeat(zeros)}${n}${ows}`)
    expect(outcome).toBe(BigInt(n) > BigInt(MAX) ? "ours-saturates" : "agree")
  }, { fastCheck: { numRuns: 1000 } })

  // a date spelled in every way Effect reads it: obsolete formats, any case, any day name, any whitespace around
  const spelled = fc.record({
    at: secondAligned.filter((ms) => ms >= Date.UTC(1970, 0, 1) && ms < Date.UTC(2070, 0, 1)),
    format: fc.constantFrom("imf", "rfc850", "asctime"),
    upper: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
    day: fc.option(fc.constantFrom(...DAYS), { nil: undefined }),
    before: fc.constantFrom("", " ", "\t", "\n", "\r\n", "\u00a0", "\v"),
    after: fc.constantFrom("", " ", "\t", "\n", "\u00a0", "\f")
  }).map(({ after, at, before, day, format, upper }) => {
    const date = new Date(at)
    const imf = date.toUTCString()
    const [, dd, mon, yyyy, time] = imf.split(" ")
    const weekday = day ?? imf.slice(0, 3)
    const long = {
      Sun: "Sunday",
      Mon: "Monday",
      Tue: "Tuesday",
      Wed: "Wednesday",
      Thu: "Thursday",
      Fri: "Friday",
      Sat: "Saturday"
    }[weekday]!
    const text = format === "imf"
      ? `${weekday}, ${dd} ${mon} ${yyyy} ${time} GMT`
      : format === "rfc850"
      ? `${long}, ${dd}-${mon}-${yyyy!.slice(2)} ${time} GMT`
      : `${weekday} ${mon} ${String(date.getUTCDate()).padStart(2, " ")} ${time} ${yyyy}`
    const cased = [...text].map((c, i) => upper[i % upper.length] ? c.toUpperCase() : c.toLowerCase()).join("")
    return `${before}${upper[0] ? cased : text}${after}`
  })

  prop("dates in any spelling: agreement, or a documented difference", [spelled, anyNow], ([value, t]) => {
    const outcome = compare(value, t)
    expect(["agree", "obsolete", "case", "day-name", "whitespace"]).toContain(outcome)
  }, { fastCheck: { numRuns: 2000 } })

  const headerish = fc.string({
    unit: fc.constantFrom(
      ..."0123456789 \t\n,:+-.eGMTgmtSunMonDecNov".split(""),
      "GMT",
      "Sun, ",
      " Nov ",
      "1994",
      "-94"
    )
  })

  prop("any string: Effect accepts all we accept, with the same delay", [
    fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), headerish)
  ], ([value]) => {
    compare(value)
  }, { fastCheck: { numRuns: 3000 } })

  it("a now that is not finite: none from us, a delay from Effect for delay-seconds", () => {
    for (const t of [Number.NaN, Infinity, -Infinity]) {
      expect(ours("120", t)).toBeUndefined()
      expect(Duration.toMillis(theirs("120", t)!)).toBe(120_000)
    }
  })

  it("non-string input from untyped callers: none from us, a TypeError from Effect", () => {
    for (const value of [undefined, null, 120, {}]) {
      expect(RetryAfter.parse(value as any, now)).toEqual(Option.none())
      expect(() => Headers.parseRetryAfter(value as any)).toThrow(TypeError)
    }
  })

  prop("format writes what formatRetryAfter writes, up to maxDelaySeconds", [
    fc.oneof(
      fc.integer({ min: 0, max: MAX * 1000 }),
      fc.integer({ min: -1e9, max: 0 }),
      fc.double({ min: 0, max: 1e6 })
    )
  ], ([ms]) => {
    expect(RetryAfter.format(Duration.millis(ms))).toBe(
      Headers.formatRetryAfter(Headers.retryAfterDuration(Duration.millis(ms)))
    )
  }, { fastCheck: { numRuns: 1000 } })

  it("format: an infinite delay is maxDelaySeconds + 1 for us; Effect has no header for it and throws", () => {
    expect(RetryAfter.format(Duration.infinity)).toBe(String(MAX + 1))
    expect(() => Headers.retryAfterDuration(Duration.infinity)).toThrow()
  })
})
