import fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as RetryAfter from "../src/retryAfter.js"
import { prop } from "./support/prop.js"

const days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
const pad = (n: number, width = 2) => String(n).padStart(width, "0")
/** An IMF-fixdate written from a Date, independently of the parser. */
const imf = (d: Date) =>
  `${days[d.getUTCDay()]}, ${pad(d.getUTCDate())} ${months[d.getUTCMonth()]} ${pad(d.getUTCFullYear(), 4)} ` +
  `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} GMT`

const wholeSeconds = fc.integer({ min: 0, max: 253402300799 }).map((s) => s * 1000) // up to 9999-12-31

describe("core/retryAfter", () => {
  it("reads delay-seconds and IMF-fixdates as milliseconds", () => {
    const now = Date.UTC(1994, 10, 6, 8, 49, 0)
    expect(RetryAfter.parse("120", now)).toBe(120_000)
    expect(RetryAfter.parse(" 007\t", now)).toBe(7_000)
    expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now)).toBe(37_000)
    expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now + 60_000)).toBe(0)
    expect(RetryAfter.parse("99999999999999999999", now)).toBe(Infinity)
  })

  it("gives undefined for everything else", () => {
    for (
      const v of [
        "",
        "-1",
        "+1",
        "1.0",
        "1e3",
        "0x10",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Mon, 06 Nov 1994 08:49:37 GMT"
      ]
    ) {
      expect(RetryAfter.parse(v, 0), v).toBeUndefined()
    }
    expect(RetryAfter.parse("1", Number.NaN)).toBeUndefined()
    expect(RetryAfter.parse("1", Infinity)).toBeUndefined()
  })

  prop("never negative, never NaN, for any text and any finite now", [
    fc.oneof(fc.string(), fc.stringMatching(/^[0-9]{1,25}$/), wholeSeconds.map((ms) => imf(new Date(ms)))),
    fc.double({ noNaN: true, noDefaultInfinity: true })
  ], ([value, now]) => {
    const ms = RetryAfter.parse(value, now)
    if (ms !== undefined) {
      expect(Number.isNaN(ms)).toBe(false)
      expect(ms).toBeGreaterThanOrEqual(0)
    }
  })

  prop("a written IMF-fixdate reads back as the same instant", [wholeSeconds], ([ms]) => {
    expect(RetryAfter.parseHttpDate(imf(new Date(ms)))).toBe(ms)
    expect(RetryAfter.parse(imf(new Date(ms)), ms - 1500)).toBe(1500)
  })

  prop("format then parse never comes back early", [fc.double({ min: 0, max: 1e15, noNaN: true })], ([ms]) => {
    const back = RetryAfter.parse(RetryAfter.formatMillis(ms), 0)!
    expect(back).toBeGreaterThanOrEqual(ms)
    expect(back - ms).toBeLessThanOrEqual(1000)
  })

  it("formats whole seconds rounded up, saturating past the exact range", () => {
    expect(RetryAfter.formatMillis(1500)).toBe("2")
    expect(RetryAfter.formatMillis(0)).toBe("0")
    expect(RetryAfter.formatMillis(-5)).toBe("0")
    expect(RetryAfter.formatMillis(Number.NaN)).toBe("0")
    expect(RetryAfter.formatMillis(Infinity)).toBe(String(RetryAfter.maxDelaySeconds + 1))
    expect(RetryAfter.parse(RetryAfter.formatMillis(Infinity), 0)).toBe(Infinity)
    expect(RetryAfter.formatNanos(BigInt(1))).toBe("1")
    expect(RetryAfter.formatNanos(BigInt(-1))).toBe("0")
    expect(RetryAfter.formatNanos(BigInt(2_000_000_000))).toBe("2")
  })
})
