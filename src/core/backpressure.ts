/**
 * Shared backpressure: when a server says "hold off" — a 429 or 503 with `Retry-After`, or a `RateLimit` field
 * whose remaining quota is zero — every caller of that origin waits until then, not only the request that heard
 * it. These are the decisions; the client keeps one instant per origin.
 */
import type { ServiceLimit } from "./rateLimitHeaders.js"

/** Statuses whose `Retry-After` speaks for the whole origin (the server is throttling or overloaded). */
export const pausesOrigin = (status: number): boolean => status === 429 || status === 503

/**
 * How long the whole origin should hold off after this response, in milliseconds, capped at `maxMillis`;
 * `undefined` when the response asks nothing of the other callers. `retryAfterMillis` is the parsed
 * `Retry-After` (counted only on a 429 or 503); `limits` the parsed `RateLimit` field: an item with `r=0` and a
 * `t` asks to wait `t` seconds.
 */
export const pauseMillis = (
  status: number,
  retryAfterMillis: number | undefined,
  limits: ReadonlyArray<ServiceLimit> | undefined,
  maxMillis: number
): number | undefined => {
  let pause = pausesOrigin(status) && retryAfterMillis !== undefined && retryAfterMillis > 0 ? retryAfterMillis : 0
  for (const limit of limits ?? []) {
    if (limit.remaining === 0 && limit.reset !== undefined && limit.reset > 0) {
      pause = Math.max(pause, limit.reset * 1000)
    }
  }
  return pause > 0 ? Math.min(pause, maxMillis) : undefined
}

/**
 * What a new request to a paused origin does at `now`: go at once, wait `millis`, or give up because its deadline
 * comes before the pause ends (waiting would only fail later).
 */
export type Hold =
  | { readonly _tag: "Go" }
  | { readonly _tag: "Wait"; readonly millis: number }
  | { readonly _tag: "GiveUp"; readonly until: number }

const go: Hold = { _tag: "Go" }

export const hold = (pausedUntil: number | undefined, now: number, deadline: number | undefined): Hold => {
  if (pausedUntil === undefined || !(pausedUntil > now)) return go
  if (deadline !== undefined && deadline < pausedUntil) return { _tag: "GiveUp", until: pausedUntil }
  return { _tag: "Wait", millis: pausedUntil - now }
}
