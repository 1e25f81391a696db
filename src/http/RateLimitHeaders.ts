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
 * @since 0.1.0
 */
import { Option } from "effect"
import * as sf from "../internal/structuredFields.js"

/**
 * One quota policy: `name` allows `quota` units per `window` seconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface QuotaPolicy {
  readonly name: string
  readonly quota: number
  /** The time window in seconds; optional in the draft. */
  readonly window?: number | undefined
}

/**
 * The current state of one policy: `remaining` units left, reset in `reset` seconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServiceLimit {
  readonly name: string
  readonly remaining: number
  /** Seconds until the quota resets; optional when reading. */
  readonly reset?: number | undefined
}

/**
 * Header names, canonical case (HTTP header names are case-insensitive).
 *
 * @since 0.1.0
 * @category constants
 */
export const policyHeader = "RateLimit-Policy"

/**
 * @since 0.1.0
 * @category constants
 */
export const rateLimitHeader = "RateLimit"

/**
 * Whether `name` can be written as-is: printable ASCII only (0x20–0x7E).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isValidName = (name: string): boolean => typeof name === "string" && sf.serializeString(name) !== undefined

const nameOf = (name: string): string => sf.serializeString(String(name).replace(/[^\x20-\x7e]/gu, "?"))!

const int = (n: number, round: (n: number) => number): number =>
  sf.clampInteger(typeof n === "number" ? n : Number.NaN, round)

const list = <A>(items: A | ReadonlyArray<A>): ReadonlyArray<A> => Array.isArray(items) ? items : [items as A]

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
 * @since 0.1.0
 * @category formatting
 */
export const formatPolicy = (policies: QuotaPolicy | ReadonlyArray<QuotaPolicy>): string =>
  list(policies).map((p) =>
    `${nameOf(p.name)};q=${int(p.quota, Math.floor)}` +
    (p.window === undefined ? "" : `;w=${int(p.window, Math.ceil)}`)
  ).join(",")

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
 * @since 0.1.0
 * @category formatting
 */
export const formatRateLimit = (limits: ServiceLimit | ReadonlyArray<ServiceLimit>): string =>
  list(limits).map((l) =>
    `${nameOf(l.name)};r=${int(l.remaining, Math.floor)}` +
    (l.reset === undefined ? "" : `;t=${int(l.reset, Math.ceil)}`)
  ).join(",")

type Param = { readonly _tag: "absent" } | { readonly _tag: "value"; readonly value: number } | {
  readonly _tag: "invalid"
}

const integerParam = (params: sf.Parameters, key: string): Param => {
  const v = params.get(key)
  if (v === undefined) return { _tag: "absent" }
  return v.type === "integer" && v.value >= 0 ? { _tag: "value", value: v.value } : { _tag: "invalid" }
}

const parseMembers = <A>(
  value: string,
  required: string,
  optional: string,
  build: (name: string, required: number, optional: number | undefined) => A
): Option.Option<ReadonlyArray<A>> => {
  const members = sf.parseList(value)
  if (members === undefined || members.length === 0) return Option.none()
  const out: Array<A> = []
  for (const m of members) {
    if (m._tag !== "Item" || (m.value.type !== "string" && m.value.type !== "token")) return Option.none()
    const req = integerParam(m.params, required)
    const opt = integerParam(m.params, optional)
    if (req._tag !== "value" || opt._tag === "invalid") return Option.none()
    out.push(build(m.value.value, req.value, opt._tag === "value" ? opt.value : undefined))
  }
  return Option.some(out)
}

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
 * @since 0.1.0
 * @category parsing
 */
export const parsePolicy = (value: string): Option.Option<ReadonlyArray<QuotaPolicy>> =>
  parseMembers(
    value,
    "q",
    "w",
    (name, quota, window): QuotaPolicy => window === undefined ? { name, quota } : { name, quota, window }
  )

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
 * @since 0.1.0
 * @category parsing
 */
export const parseRateLimit = (value: string): Option.Option<ReadonlyArray<ServiceLimit>> =>
  parseMembers(
    value,
    "r",
    "t",
    (name, remaining, reset): ServiceLimit => reset === undefined ? { name, remaining } : { name, remaining, reset }
  )
