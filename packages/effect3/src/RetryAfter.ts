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
import type { Duration, Option } from "effect"
import * as internal from "./internal/http/retryAfter.js"

/**
 * The longest delay-seconds value read exactly: `floor(Number.MAX_SAFE_INTEGER / 1000)`. Longer delays
 * parse as `Duration.infinity`, and {@link format} writes `Duration.infinity` as `maxDelaySeconds + 1`.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxDelaySeconds: number = internal.maxDelaySeconds

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
export const parseHttpDate: (value: string) => Option.Option<number> = internal.parseHttpDate

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
export const parse: (headerValue: string, nowMillis: number) => Option.Option<Duration.Duration> = internal.parse

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
export const format: (duration: Duration.DurationInput) => string = internal.format
