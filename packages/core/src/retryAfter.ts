/**
 * The `Retry-After` header (RFC 9110 §10.2.3) as numbers: delay-seconds or an IMF-fixdate in, milliseconds
 * to wait out; a delay in, whole seconds out. The caller passes the current time, so the result depends on
 * nothing else. The `RetryAfter` module wraps these in `Option` and `Duration` and documents the choices
 * (obsolete date formats refused, huge delays saturate, a past date is zero).
 */
import { trimOws } from "./structuredFields.js"

/** The longest delay-seconds value read exactly: `floor(Number.MAX_SAFE_INTEGER / 1000)`. */
export const maxDelaySeconds = Math.floor(Number.MAX_SAFE_INTEGER / 1000)

const DELAY_SECONDS = /^[0-9]+$/
const IMF_FIXDATE =
  /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), ([0-9]{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) ([0-9]{4}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) GMT$/
const DAY_NAMES = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

const isLeapYear = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0

const daysInMonth = (y: number, m: number): number =>
  m === 2 ? (isLeapYear(y) ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31

/** Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard Hinnant's days_from_civil). */
const daysFromCivil = (y: number, m: number, d: number): number => {
  const yy = m <= 2 ? y - 1 : y
  const era = Math.floor(yy / 400)
  const yoe = yy - era * 400
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
}

/**
 * An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) as epoch milliseconds, surrounding spaces and tabs
 * ignored; `undefined` for any other text. Strict: the day name must match the date, the day must exist in
 * its month, hours 00–23, minutes 00–59, seconds 00–60 (a leap second counts as the next second).
 */
export const parseHttpDate = (value: string): number | undefined => {
  if (typeof value !== "string") return undefined
  const match = IMF_FIXDATE.exec(trimOws(value))
  if (match === null) return undefined
  const [, dayName, dd, mon, yyyy, hh, mm, ss] = match as unknown as [string, ...Array<string>]
  const year = Number(yyyy)
  const month = MONTHS.indexOf(mon!) + 1
  const day = Number(dd)
  const hour = Number(hh)
  const minute = Number(mm)
  const second = Number(ss)
  if (day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 60) return undefined
  const days = daysFromCivil(year, month, day)
  // 1970-01-01 was a Thursday
  if (DAY_NAMES[(((days + 4) % 7) + 7) % 7] !== dayName) return undefined
  return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000
}

/**
 * How many milliseconds a `Retry-After` value asks to wait from `nowMillis`: delay-seconds (ASCII digits,
 * leading zeros allowed) times 1000, `Infinity` past {@link maxDelaySeconds}; for an IMF-fixdate the time left
 * until it, 0 if it has passed. `undefined` for anything else, and for any value when `nowMillis` is not
 * finite. The result is never negative and never NaN.
 */
export const parse = (headerValue: string, nowMillis: number): number | undefined => {
  if (typeof headerValue !== "string" || typeof nowMillis !== "number" || !Number.isFinite(nowMillis)) {
    return undefined
  }
  const value = trimOws(headerValue)
  if (DELAY_SECONDS.test(value)) {
    const digits = value.replace(/^0+(?=[0-9])/, "")
    // compare lengths first: Number() of a long digit string is only approximate
    const seconds = digits.length > String(maxDelaySeconds).length ? Infinity : Number(digits)
    return seconds > maxDelaySeconds ? Infinity : seconds * 1000
  }
  const at = parseHttpDate(value)
  if (at === undefined) return undefined
  return at <= nowMillis ? 0 : at - nowMillis
}

const saturated = String(maxDelaySeconds + 1)

/**
 * A delay in milliseconds as delay-seconds: rounded up (a client must never come back early), `"0"` for
 * zero, negative or NaN, and `maxDelaySeconds + 1` (read back as infinite) past the exact range.
 */
export const formatMillis = (ms: number): string => {
  if (!(ms > 0)) return "0"
  if (ms === Infinity) return saturated
  let seconds = Math.ceil(ms / 1000)
  // ms / 1000 may round down below the true quotient
  if (seconds * 1000 < ms) seconds += 1
  return seconds > maxDelaySeconds ? saturated : String(seconds)
}

const NANOS_PER_SECOND = BigInt(1_000_000_000)

/** {@link formatMillis} for a delay in nanoseconds, without the precision a conversion to number would lose. */
export const formatNanos = (nanos: bigint): string => {
  const seconds = nanos <= BigInt(0) ? BigInt(0) : (nanos + NANOS_PER_SECOND - BigInt(1)) / NANOS_PER_SECOND
  return seconds > BigInt(maxDelaySeconds) ? saturated : String(seconds)
}
