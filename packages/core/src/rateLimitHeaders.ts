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

/** The middleware's `RateLimit` for a decision leaving `remaining` units, more of which come in `nextMillis`. */
export const stateFor = (name: string, remaining: number, nextMillis: number): string =>
  formatRateLimit({ name, remaining, reset: secondsOf(nextMillis) })

/** What the middleware knows of its limiter and of one decision, in milliseconds. */
export interface Quota {
  readonly algorithm: "token-bucket" | "fixed-window" | "sliding-window"
  readonly limit: number
  /** The window, or a token bucket's time to refill from empty. */
  readonly windowMillis: number
  readonly allowed: boolean
  readonly remaining: number
  /** When the refused request would pass (0 when allowed). */
  readonly retryAfterMillis: number
  /** When the key is back to its initial state. */
  readonly resetAfterMillis: number
}

/**
 * The `t` of the `RateLimit` field: in draft-ietf-httpapi-ratelimit-headers-11 the seconds until *additional*
 * quota is made available, not until it is all restored. So a client told `r=0` can come back at `t` and be
 * admitted, which is what it acts on:
 *
 * - refused: when the request would pass, the same moment as `Retry-After` (the draft asks the two to agree);
 * - token bucket: when the next whole token is in (`remaining + 1`), one refill interval at most;
 * - fixed window: when the window ends (nothing comes back before);
 * - sliding window (a weighted two-window count): an upper bound of when one more unit fits, at most a
 *   `1 / limit` share into the next window, never later than the full reset.
 */
export const nextQuotaMillis = (quota: Quota): number => {
  const { limit, remaining, resetAfterMillis: reset, windowMillis } = quota
  if (!quota.allowed) return quota.retryAfterMillis
  const share = limit > 0 ? windowMillis / limit : windowMillis
  switch (quota.algorithm) {
    case "token-bucket":
      // the bucket is `reset` from full; `remaining + 1` tokens are there `limit - remaining - 1` tokens earlier
      return Math.max(0, reset - (limit - remaining - 1) * share)
    case "fixed-window":
      return reset
    case "sliding-window":
      return Math.min(reset, Math.max(0, reset - windowMillis) + share)
  }
}

/** A refusal's `Retry-After` in whole seconds: rounded up and at least 1, so a client never comes back at once. */
export const retryAfterSeconds = (retryAfterMillis: number): number => Math.max(1, secondsOf(retryAfterMillis))
