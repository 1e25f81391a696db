/**
 * The `RateLimit-Policy` and `RateLimit` response headers of draft-ietf-httpapi-ratelimit-headers-11,
 * written and read as Structured Field Lists (RFC 9651):
 *
 * ```text
 * RateLimit-Policy: "burst";q=100;w=60,"daily";q=1000;w=86400
 * RateLimit: "default";r=50;t=30
 * ```
 *
 * `q` is the quota, `w` the window in seconds, `r` the remaining quota and `t` the seconds until it
 * resets. The draft is still a draft: names may change. When `Retry-After` is also present it wins.
 *
 * Formatting is total: names are always written as sf-strings, numbers are clamped to non-negative
 * Structured Field Integers (quota and remaining rounded down, window and reset rounded up — never
 * promise more than there is), and characters an sf-string cannot carry become `?`
 * (check configuration with {@link isValidName}).
 *
 * Parsing is strict about syntax and lenient about extensions, as RFC 9651 asks: any malformed field,
 * an empty field (the draft requires a non-empty List), an item that is not a String or Token, or a
 * missing, non-Integer or negative `q` / `r` gives `none`. `w` and `t` may be absent. Unknown parameters
 * (`qu`, `pk`, vendor ones) are ignored.
 *
 * @since 1.0.0
 */
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import * as core from "@effect-resilience/core/rateLimitHeaders"
import type { Option } from "effect"
import * as internal from "./internal/http/rateLimitHeaders.js"

/**
 * One quota policy: `name` allows `quota` units per `window` seconds.
 *
 * @since 1.0.0
 * @category models
 */
export interface QuotaPolicy extends core.QuotaPolicy {}

/**
 * The current state of one policy: `remaining` units left, reset in `reset` seconds.
 *
 * @since 1.0.0
 * @category models
 */
export interface ServiceLimit extends core.ServiceLimit {}

/**
 * Header names, canonical case (HTTP header names are case-insensitive).
 *
 * @since 1.0.0
 * @category constants
 */
export const policyHeader: "RateLimit-Policy" = HttpHeaders.spelled[HttpHeaders.rateLimitPolicy]

/**
 * @since 1.0.0
 * @category constants
 */
export const rateLimitHeader: "RateLimit" = HttpHeaders.spelled[HttpHeaders.rateLimit]

/**
 * Whether `name` can be written as-is: printable ASCII only (0x20–0x7E).
 *
 * @since 1.0.0
 * @category predicates
 */
export const isValidName: (name: string) => boolean = core.isValidName

/**
 * Writes a `RateLimit-Policy` value for one or several policies. An empty array gives `""`: send no header.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "effect-resilience"
 *
 * RateLimitHeaders.formatPolicy([
 *   { name: "burst", quota: 100, window: 60 },
 *   { name: "daily", quota: 1000, window: 86400 }
 * ]) // "\"burst\";q=100;w=60,\"daily\";q=1000;w=86400"
 * ```
 *
 * @since 1.0.0
 * @category formatting
 */
export const formatPolicy: (policies: QuotaPolicy | ReadonlyArray<QuotaPolicy>) => string = core.formatPolicy

/**
 * Writes a `RateLimit` value for one or several policies. An empty array gives `""`: send no header.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "effect-resilience"
 *
 * RateLimitHeaders.formatRateLimit({ name: "default", remaining: 50, reset: 30 }) // "\"default\";r=50;t=30"
 * ```
 *
 * @since 1.0.0
 * @category formatting
 */
export const formatRateLimit: (limits: ServiceLimit | ReadonlyArray<ServiceLimit>) => string = core.formatRateLimit

/**
 * Reads a `RateLimit-Policy` value. See the module documentation for what is rejected.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "effect-resilience"
 *
 * RateLimitHeaders.parsePolicy("\"burst\";q=100;w=60,\"daily\";q=1000;w=86400")
 * // Option.some([{ name: "burst", quota: 100, window: 60 }, { name: "daily", quota: 1000, window: 86400 }])
 * ```
 *
 * @since 1.0.0
 * @category parsing
 */
export const parsePolicy: (value: string) => Option.Option<ReadonlyArray<QuotaPolicy>> = internal.parsePolicy

/**
 * Reads a `RateLimit` value. See the module documentation for what is rejected.
 *
 * @example
 * ```ts
 * import { RateLimitHeaders } from "effect-resilience"
 *
 * RateLimitHeaders.parseRateLimit("\"default\";r=50;t=30")
 * // Option.some([{ name: "default", remaining: 50, reset: 30 }])
 * ```
 *
 * @since 1.0.0
 * @category parsing
 */
export const parseRateLimit: (value: string) => Option.Option<ReadonlyArray<ServiceLimit>> = internal.parseRateLimit
