/**
 * The `Retry-After` response header (RFC 9110 §10.2.3): how long the client should wait before the next
 * attempt, sent with 429, 503 (and sometimes 413 or 3xx).
 *
 * Two forms are read: delay-seconds (`120`) and an IMF-fixdate (`Fri, 31 Dec 1999 23:59:59 GMT`).
 * Anything else is `none`, so the caller falls back to its own backoff. Decisions:
 *
 * - **Obsolete date formats are refused.** RFC 9110 §5.6.7 asks recipients to also accept the RFC 850
 *   (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) formats. They have not been
 *   generated since HTTP/1.1 (1997), RFC 850 has a two-digit year, and refusing one only means the client
 *   uses its backoff instead — the safe direction. Dates are also case-sensitive, as the RFC says.
 * - **Huge delays saturate.** Delays up to {@link maxDelaySeconds} (about 285,000 years, the largest whole
 *   second count exact in milliseconds) are exact; longer ones are `Duration.infinity`. Capping is the retry
 *   policy's job (`maxRetryAfter`).
 * - A date in the past, or now, gives `Duration.zero`.
 *
 * @since 0.1.0
 */
import { Duration, Option } from "effect"
import { trimOws } from "../internal/structuredFields.js"

/**
 * The longest delay-seconds value read exactly: `floor(Number.MAX_SAFE_INTEGER / 1000)`. Longer delays
 * parse as `Duration.infinity`, and {@link format} writes `Duration.infinity` as `maxDelaySeconds + 1`.
 *
 * @since 0.1.0
 * @category constants
 */
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
 * Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to epoch milliseconds, ignoring surrounding
 * spaces and tabs. Strict: the day name must match the date, the day must exist in its month, hours are
 * 00–23, minutes 00–59, seconds 00–60 (a leap second counts as the next second). Other formats give `none`.
 *
 * @example
 * ```ts
 * import { RetryAfter } from "effect-resilience"
 *
 * RetryAfter.parseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT") // Option.some(784111777000)
 * RetryAfter.parseHttpDate("Mon, 06 Nov 1994 08:49:37 GMT") // Option.none(): it was a Sunday
 * ```
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseHttpDate = (value: string): Option.Option<number> => {
  if (typeof value !== "string") return Option.none()
  const match = IMF_FIXDATE.exec(trimOws(value))
  if (match === null) return Option.none()
  const [, dayName, dd, mon, yyyy, hh, mm, ss] = match as unknown as [string, ...Array<string>]
  const year = Number(yyyy)
  const month = MONTHS.indexOf(mon!) + 1
  const day = Number(dd)
  const hour = Number(hh)
  const minute = Number(mm)
  const second = Number(ss)
  if (day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59 || second > 60) return Option.none()
  const days = daysFromCivil(year, month, day)
  // 1970-01-01 was a Thursday
  if (DAY_NAMES[(((days + 4) % 7) + 7) % 7] !== dayName) return Option.none()
  return Option.some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000)
}

/**
 * Parses a `Retry-After` value into how long to wait from `nowMillis` (epoch milliseconds, e.g. from
 * `Clock.currentTimeMillis`). Delay-seconds are ASCII digits only (leading zeros allowed); an IMF-fixdate
 * gives the time left until it, or zero if it has passed. Surrounding spaces and tabs are ignored.
 * Everything else — `-1`, `+1`, `1.0`, `1e3`, `0x10`, an empty value, obsolete date formats, impossible
 * dates — is `none`, as is any value when `nowMillis` is not finite. Never throws.
 *
 * @example
 * ```ts
 * import { Clock, Effect, Option } from "effect"
 * import { RetryAfter } from "effect-resilience"
 *
 * const wait = (header: string) =>
 *   Clock.currentTimeMillis.pipe(
 *     Effect.map((now) => RetryAfter.parse(header, now)),
 *     Effect.map(Option.getOrElse(() => "1 second" as const))
 *   )
 * ```
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (headerValue: string, nowMillis: number): Option.Option<Duration.Duration> => {
  if (typeof headerValue !== "string" || typeof nowMillis !== "number" || !Number.isFinite(nowMillis)) {
    return Option.none()
  }
  const value = trimOws(headerValue)
  if (DELAY_SECONDS.test(value)) {
    const digits = value.replace(/^0+(?=[0-9])/, "")
    // compare as strings first: Number() of a long digit string is only approximate
    const tooLong = digits.length > String(maxDelaySeconds).length
    const seconds = tooLong ? Infinity : Number(digits)
    return Option.some(seconds > maxDelaySeconds ? Duration.infinity : Duration.seconds(seconds))
  }
  return Option.map(parseHttpDate(value), (at) => at <= nowMillis ? Duration.zero : Duration.millis(at - nowMillis))
}

/**
 * Writes a `Retry-After` delay-seconds value: whole seconds rounded up (so a client never comes back too
 * early), never negative. `Duration.infinity` is written as `maxDelaySeconds + 1`, which {@link parse}
 * reads back as `Duration.infinity`.
 *
 * @example
 * ```ts
 * import { RetryAfter } from "effect-resilience"
 *
 * RetryAfter.format("1500 millis") // "2"
 * RetryAfter.format("0 millis") // "0"
 * ```
 *
 * @since 0.1.0
 * @category formatting
 */
export const format = (duration: Duration.DurationInput): string => {
  const d = Duration.decode(duration)
  const saturated = String(maxDelaySeconds + 1)
  switch (d.value._tag) {
    case "Infinity":
      return saturated
    case "Nanos": {
      const second = BigInt(1_000_000_000)
      const nanos = d.value.nanos
      const seconds = nanos <= BigInt(0) ? BigInt(0) : (nanos + second - BigInt(1)) / second
      return seconds > BigInt(maxDelaySeconds) ? saturated : String(seconds)
    }
    case "Millis": {
      // through milliseconds, not nanoseconds: millis * 1e6 loses precision past 2^53
      const ms = d.value.millis
      if (!(ms > 0)) return "0"
      let seconds = Math.ceil(ms / 1000)
      if (seconds * 1000 < ms) seconds += 1
      return seconds > maxDelaySeconds ? saturated : String(seconds)
    }
  }
}
