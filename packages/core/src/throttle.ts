/**
 * Client-side adaptive throttling, as the Google SRE book describes it: per key, count the requests the client
 * tried and the ones the backend accepted over a sliding window, and reject a new request locally with
 * probability `max(0, (requests − K·accepts) / (requests + 1))`. While the backend accepts everything the
 * probability is 0; when it accepts almost nothing the client sends only about `K` times what gets accepted,
 * so an overloaded backend spends little on requests it would refuse anyway. The probability is capped at
 * `maxRejectionRate` (failsafe-go's name): below 1, some requests always reach a backend that is recovering,
 * which is how the throttle learns that it has recovered.
 *
 * The window is a ring of buckets (time is an argument, in milliseconds); old buckets are dropped as time passes,
 * so the counts forget an outage gradually, not all at once.
 */

export interface Config {
  /** The window, in milliseconds (> 0). */
  readonly windowMillis: number
  /** Buckets in the window (integer >= 1): the window slides by `windowMillis / buckets`. */
  readonly buckets: number
  /** `K` (>= 1): 2 lets the client send twice what the backend accepts. */
  readonly k: number
  /** The rejection probability never exceeds this, in [0, 1]: 0 turns the throttle off, 1 leaves it uncapped. */
  readonly maxRejectionRate: number
}

/** The default `maxRejectionRate`: see docs/overload.md ("maxRejectionRate") for the storm runs behind it. */
export const MAX_REJECTION_RATE = 0.9

export const defaults: Config = { windowMillis: 120_000, buckets: 120, k: 2, maxRejectionRate: MAX_REJECTION_RATE }

/** The rejection probability for these counts, at most `maxRejectionRate` (1: uncapped). */
export const rejectProbability = (requests: number, accepts: number, k: number, maxRejectionRate = 1): number =>
  Math.min(maxRejectionRate, Math.max(0, (requests - k * accepts) / (requests + 1)))

/** One key's window. Mutable on purpose: it sits on every call's path; nothing outside this module writes it. */
export interface Window {
  /** Index (time / bucket width) of the newest bucket. */
  head: number
  requests: number
  accepts: number
  readonly bucketRequests: Array<number>
  readonly bucketAccepts: Array<number>
}

export const makeWindow = (config: Config, now: number): Window => ({
  head: bucketIndex(config, now),
  requests: 0,
  accepts: 0,
  bucketRequests: new Array<number>(config.buckets).fill(0),
  bucketAccepts: new Array<number>(config.buckets).fill(0)
})

/** The bucket of `now`; a time that is not finite counts as the epoch (the caller's `Clock` never gives one). */
const bucketIndex = (config: Config, now: number) =>
  Number.isFinite(now) ? Math.floor(now / (config.windowMillis / config.buckets)) : 0

/** Drops the buckets that have left the window by `now`. Time going backwards is treated as no time passing. */
export const advance = (config: Config, window: Window, now: number): void => {
  const index = bucketIndex(config, now)
  if (index <= window.head) return
  const n = config.buckets
  const steps = Math.min(n, index - window.head)
  for (let i = 1; i <= steps; i++) {
    const slot = (((window.head + i) % n) + n) % n
    window.requests -= window.bucketRequests[slot]!
    window.accepts -= window.bucketAccepts[slot]!
    window.bucketRequests[slot] = 0
    window.bucketAccepts[slot] = 0
  }
  window.head = index
}

const slotOf = (config: Config, window: Window) => ((window.head % config.buckets) + config.buckets) % config.buckets

/**
 * Decides a new request at `now`: `random` in [0, 1) is compared with the rejection probability. The request is
 * counted either way (a locally rejected request is still a request: that is what lets the probability fall
 * again only as the backend accepts).
 */
export const admit = (config: Config, window: Window, now: number, random: number): boolean => {
  advance(config, window, now)
  const reject = random < rejectProbability(window.requests, window.accepts, config.k, config.maxRejectionRate)
  window.requests++
  window.bucketRequests[slotOf(config, window)]!++
  return !reject
}

/** Records that the backend accepted a request (it answered, even with a non-overload error). */
export const recordAccept = (config: Config, window: Window, now: number): void => {
  advance(config, window, now)
  window.accepts++
  window.bucketAccepts[slotOf(config, window)]!++
}

/** The probability a request at `now` would be rejected (for metrics and tests). */
export const probabilityAt = (config: Config, window: Window, now: number): number => {
  advance(config, window, now)
  return rejectProbability(window.requests, window.accepts, config.k, config.maxRejectionRate)
}
