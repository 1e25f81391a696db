/**
 * The `RateLimit-Policy` and `RateLimit` fields of draft-ietf-httpapi-ratelimit-headers as Structured Field
 * Lists, and the numbers the rate-limit middleware writes in them. The `RateLimitHeaders` module documents
 * the rules (what formatting clamps, what parsing rejects) and wraps the parse results in `Option`.
 */
import * as sf from "./structuredFields.js"

export interface QuotaPolicy {
  readonly name: string
  readonly quota: number
  /** The time window in seconds; optional in the draft. */
  readonly window?: number | undefined
}

export interface ServiceLimit {
  readonly name: string
  readonly remaining: number
  /** Seconds until the quota resets; optional when reading. */
  readonly reset?: number | undefined
}

/** Whether `name` can be written as-is: printable ASCII only. */
export const isValidName = (name: string): boolean => typeof name === "string" && sf.serializeString(name) !== undefined

const nameOf = (name: string): string => sf.serializeString(String(name).replace(/[^\x20-\x7e]/gu, "?"))!

const int = (n: number, round: (n: number) => number): number =>
  sf.clampInteger(typeof n === "number" ? n : Number.NaN, round)

const list = <A>(items: A | ReadonlyArray<A>): ReadonlyArray<A> => Array.isArray(items) ? items : [items as A]

/** Quota rounded down, window rounded up: a header never promises more than there is. */
export const formatPolicy = (policies: QuotaPolicy | ReadonlyArray<QuotaPolicy>): string =>
  list(policies).map((p) =>
    `${nameOf(p.name)};q=${int(p.quota, Math.floor)}` +
    (p.window === undefined ? "" : `;w=${int(p.window, Math.ceil)}`)
  ).join(",")

/** Remaining rounded down, reset rounded up. */
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
): ReadonlyArray<A> | undefined => {
  const members = sf.parseList(value)
  if (members === undefined || members.length === 0) return undefined
  const out: Array<A> = []
  for (const m of members) {
    if (m._tag !== "Item" || (m.value.type !== "string" && m.value.type !== "token")) return undefined
    const req = integerParam(m.params, required)
    const opt = integerParam(m.params, optional)
    if (req._tag !== "value" || opt._tag === "invalid") return undefined
    out.push(build(m.value.value, req.value, opt._tag === "value" ? opt.value : undefined))
  }
  return out
}

/** A non-empty List of String or Token items with an Integer `q` ≥ 0 and maybe `w`; `undefined` otherwise. */
export const parsePolicy = (value: string): ReadonlyArray<QuotaPolicy> | undefined =>
  parseMembers(
    value,
    "q",
    "w",
    (name, quota, window): QuotaPolicy => window === undefined ? { name, quota } : { name, quota, window }
  )

/** A non-empty List of String or Token items with an Integer `r` ≥ 0 and maybe `t`; `undefined` otherwise. */
export const parseRateLimit = (value: string): ReadonlyArray<ServiceLimit> | undefined =>
  parseMembers(
    value,
    "r",
    "t",
    (name, remaining, reset): ServiceLimit => reset === undefined ? { name, remaining } : { name, remaining, reset }
  )

/** Milliseconds as whole seconds, rounded up. */
export const secondsOf = (millis: number): number => Math.ceil(millis / 1000)

/** The middleware's `RateLimit-Policy` for a limiter of `limit` per `windowMillis`: the window is at least a second. */
export const policyFor = (name: string, limit: number, windowMillis: number): string =>
  formatPolicy({ name, quota: limit, window: Math.max(1, secondsOf(windowMillis)) })

/** The middleware's `RateLimit` for a decision leaving `remaining` units that resets in `resetMillis`. */
export const stateFor = (name: string, remaining: number, resetMillis: number): string =>
  formatRateLimit({ name, remaining, reset: secondsOf(resetMillis) })

/** A refusal's `Retry-After` in whole seconds: rounded up and at least 1, so a client never comes back at once. */
export const retryAfterSeconds = (retryAfterMillis: number): number => Math.max(1, secondsOf(retryAfterMillis))
