import { Effect, Metric } from "effect"
import * as Meter from "./metrics.js"
import { counterWith } from "./metrics.js"

/**
 * The metrics of issue 33 that no module exported before: histograms in seconds and the server middlewares'
 * decision counters. Names follow Prometheus (`effect_resilience_…`, the unit in the name, `_total` on counters);
 * the HTTP client's attempt duration follows OpenTelemetry's `http.client.request.duration` (seconds, `error.type`).
 * Every label is bounded: docs/observability.md lists each one and its cap.
 */

/** OpenTelemetry's advice for `http.client.request.duration`, in seconds; used by every duration here. */
export const secondsBoundaries: ReadonlyArray<number> = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.075,
  0.1,
  0.25,
  0.5,
  0.75,
  1,
  2.5,
  5,
  7.5,
  10,
  30,
  60
]

export const attemptDuration = Meter.histogram("http_client_request_duration_seconds", {
  description: "one send attempt of a ResilientHttpClient (OpenTelemetry http.client.request.duration), seconds",
  boundaries: secondsBoundaries
})

export const operationDuration = Meter.histogram("effect_resilience_http_client_operation_duration_seconds", {
  description: "one logical request of a ResilientHttpClient, every attempt and backoff included, seconds",
  boundaries: secondsBoundaries
})

export const backoffDelay = Meter.histogram("effect_resilience_retry_backoff_seconds", {
  description: "the delay chosen before each retry (schedule or Retry-After), seconds",
  boundaries: secondsBoundaries
})

export const bulkheadQueueWait = Meter.histogram("effect_resilience_bulkhead_queue_wait_seconds", {
  description: "how long a call that queued waited for a bulkhead slot, seconds",
  boundaries: secondsBoundaries
})

export const adaptiveLimiterQueueWait = Meter.histogram("effect_resilience_adaptive_limiter_queue_wait_seconds", {
  description: "how long a call that queued waited for an adaptive limiter slot, seconds",
  boundaries: secondsBoundaries
})

export const rateLimiterWait = Meter.histogram("effect_resilience_rate_limiter_wait_seconds", {
  description: "how long RateLimiter.acquire waited for its permits, seconds",
  boundaries: secondsBoundaries
})

/** The histogram's series with `attributes` (same boundaries): built once, updated with no allocation. */
export const histogramWith = (
  histogram: Metric.Histogram<number>,
  attributes: Readonly<Record<string, string>>
): Metric.Histogram<number> =>
  Meter.histogram(histogram.id, { description: histogram.description, boundaries: secondsBoundaries, attributes })

export const idempotencyRequests = Meter.counter("effect_resilience_idempotency_requests_total", {
  description: "requests IdempotencyMiddleware decided on, tagged outcome",
  incremental: true
})

export const rateLimitRequests = Meter.counter("effect_resilience_rate_limit_requests_total", {
  description: "requests RateLimitMiddleware decided on, tagged limiter and decision",
  incremental: true
})

export const loadShedRequests = Meter.counter("effect_resilience_load_shed_requests_total", {
  description: "requests LoadShedMiddleware admitted or refused, tagged limiter, criticality and decision",
  incremental: true
})

/**
 * Sets every series in `series` to its value plus zero, once: a counter exists (at 0) from the first request on,
 * so a PromQL ratio or `rate` over it returns a series before the first refusal, as Prometheus advises.
 */
export const initOnce = (series: ReadonlyArray<Metric.Counter<number>>): () => Effect.Effect<void> => {
  let done = false
  const init = Effect.forEach(series, (s) => Metric.update(s, 0), { discard: true })
  return () => {
    if (done) return Effect.void
    done = true
    return init
  }
}

/** What IdempotencyMiddleware did with a request: one `outcome` label value each. */
export type IdempotencyOutcome =
  | "new" // claimed: the handler ran
  | "replay" // completed before: the stored answer was replayed
  | "in_progress" // 409: the first request with this key is still running
  | "mismatch" // 422: the key was used with another request
  | "invalid" // 400: key missing (when required), malformed, or the body unreadable
  | "too_large" // 413
  | "store_error" // 503: the store failed the claim
  | "store_full" // 503: the store refused a new key
  | "unkeyed" // no key and none required: passed through unguarded

const idempotencyOutcomes: ReadonlyArray<IdempotencyOutcome> = [
  "new",
  "replay",
  "in_progress",
  "mismatch",
  "invalid",
  "too_large",
  "store_error",
  "store_full",
  "unkeyed"
]

/** One series per outcome, built once: an update allocates nothing. */
export const idempotencySeries: Readonly<Record<IdempotencyOutcome, Metric.Counter<number>>> = Object.fromEntries(
  idempotencyOutcomes.map((outcome) => [outcome, counterWith(idempotencyRequests, { outcome })])
) as Record<IdempotencyOutcome, Metric.Counter<number>>

/** RateLimitMiddleware's decisions: `outage_*` when the store could not count. */
export type RateLimitDecision = "allowed" | "denied" | "outage_allowed" | "outage_denied" | "no_scope"

export const rateLimitSeries = (limiter: string): Readonly<Record<RateLimitDecision, Metric.Counter<number>>> => {
  const of = (decision: RateLimitDecision) => counterWith(rateLimitRequests, { limiter, decision })
  return {
    allowed: of("allowed"),
    denied: of("denied"),
    outage_allowed: of("outage_allowed"),
    outage_denied: of("outage_denied"),
    no_scope: of("no_scope")
  }
}

/** Every criticality's `admitted` and `shed` series of one load shedder, at 0 from the start. */
export const zeroShedSeries = (seriesOf: (criticality: string, decision: string) => Metric.Counter<number>) =>
  Effect.forEach(
    ["critical", "default", "sheddable"].flatMap((level) => [seriesOf(level, "admitted"), seriesOf(level, "shed")]),
    (series) => Metric.update(series, 0),
    { discard: true }
  )

/** LoadShedMiddleware's series of one limiter, one per criticality and decision (both bounded sets), made lazily. */
export const loadShedSeries = (limiter: string) => {
  const made = new Map<string, Metric.Counter<number>>()
  return (criticality: string, decision: string): Metric.Counter<number> => {
    const id = `${criticality}\u0000${decision}`
    let series = made.get(id)
    if (series === undefined) {
      series = counterWith(loadShedRequests, { limiter, criticality, decision })
      made.set(id, series)
    }
    return series
  }
}
