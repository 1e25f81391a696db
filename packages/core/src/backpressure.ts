/**
 * Shared backpressure: when an origin tells its callers to hold off, every caller of the client waits, not only
 * the request that heard it — but only as far as the evidence goes.
 *
 * - A `RateLimit` item with `r=0` says the client's quota is spent: every request would be refused, so the whole
 *   origin waits, for the response's `Retry-After` when it has one (it takes precedence, as the RateLimit draft
 *   says), else for the item's `t` (draft-11: when more quota is made available).
 * - A 429 or 503 with `Retry-After` is one answer about one request. It pauses the origin only when refusals are
 *   most of what the origin has been answering lately (`threshold` of the answers, weighted by age with a
 *   half-life, once there are `minAnswers` of them): a mostly healthy origin is not paused by one refusal, and
 *   each refused request still waits for its own `Retry-After` in its retry. A server refusing everything gets
 *   quiet.
 *
 * These are the decisions; the client keeps one {@link Evidence} per origin.
 */
import type { ServiceLimit } from "./rateLimitHeaders.js"

export interface Config {
  /** The share of refusals among the recent answers from which a refusal's `Retry-After` pauses the origin. */
  readonly threshold: number
  /**
   * Answers needed before their share of refusals counts: `minAnswers` in quick succession (their decayed weights
   * add up to at least `minAnswers - 0.5`).
   */
  readonly minAnswers: number
  /** How fast an answer stops counting: its weight halves every `halfLifeMillis`. */
  readonly halfLifeMillis: number
  /** The longest pause an answer can cause. */
  readonly maxPauseMillis: number
}

export const defaults: Config = { threshold: 0.5, minAnswers: 3, halfLifeMillis: 10_000, maxPauseMillis: 60_000 }

/** What an origin answered lately (weights decayed to `at`), and until when every caller holds off. */
export interface Evidence {
  readonly answers: number
  readonly refusals: number
  readonly at: number
  readonly pausedUntil: number
}

export const none: Evidence = { answers: 0, refusals: 0, at: 0, pausedUntil: 0 }

/** Statuses that refuse a request for load or quota: what a `Retry-After` on them says may hold for everyone. */
export const isRefusal = (status: number): boolean => status === 429 || status === 503

/** One response, as far as backpressure cares. */
export interface Answer {
  readonly status: number
  /** The parsed `Retry-After`, in milliseconds; `undefined` when absent or malformed. */
  readonly retryAfterMillis: number | undefined
  /** The parsed `RateLimit` field; `undefined` when absent or malformed. */
  readonly limits: ReadonlyArray<ServiceLimit> | undefined
}

/**
 * How long a response says the client's quota is spent, in milliseconds: for an item with `r=0`, the
 * `Retry-After` when there is one, else its `t`; the longest over the items; `undefined` when no item is spent or
 * none says until when.
 */
export const quotaPauseMillis = (answer: Answer): number | undefined => {
  let pause: number | undefined
  for (const limit of answer.limits ?? []) {
    if (limit.remaining !== 0) continue
    const millis = answer.retryAfterMillis ?? (limit.reset === undefined ? undefined : limit.reset * 1000)
    if (millis !== undefined && millis > 0 && !(pause !== undefined && pause >= millis)) pause = millis
  }
  return pause
}

/** The evidence after one more answer at `now`. */
export const observe = (evidence: Evidence, answer: Answer, now: number, config: Config): Evidence => {
  const elapsed = now > evidence.at ? now - evidence.at : 0
  const decay = evidence.answers === 0 ? 0 : Math.pow(2, -elapsed / config.halfLifeMillis)
  const refused = isRefusal(answer.status)
  const answers = evidence.answers * decay + 1
  const refusals = evidence.refusals * decay + (refused ? 1 : 0)
  let pause = quotaPauseMillis(answer)
  if (
    pause === undefined && refused && answer.retryAfterMillis !== undefined && answer.retryAfterMillis > 0 &&
    answers >= config.minAnswers - 0.5 && refusals >= config.threshold * answers
  ) pause = answer.retryAfterMillis
  const until = pause === undefined ? 0 : now + Math.min(pause, config.maxPauseMillis)
  return { answers, refusals, at: now, pausedUntil: Math.max(evidence.pausedUntil, until) }
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

/** Whether the evidence can be forgotten at `now`: no pause left and (almost) no weight. */
export const isIdle = (evidence: Evidence, now: number, config: Config): boolean =>
  evidence.pausedUntil <= now && now - evidence.at >= 8 * config.halfLifeMillis
