/**
 * The retry: what is safe to send again (RFC 9110's method rules, or an Idempotency-Key), what is worth sending
 * again (not sent, unknown outcome, 408/429/5xx, a 409 saying the keyed request is still running), and when (the
 * schedule, the server's `Retry-After`, the deadline, the budget). Each retry re-runs everything inside it.
 */
import * as Backpressure from "@effect-resilience/core/backpressure"
import * as HttpClassify from "@effect-resilience/core/httpClassify"
import { Clock, type Duration, Effect, Exit, Metric, type Schedule } from "effect"
import type { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import type { Budget } from "../../../RetryBudget.js"
import { fullJitter } from "../../backoff.js"
import { withDeadline } from "../../deadline.js"
import { type Retryable, retryable } from "../../failure.js"
import { compileCounting, type Series, seriesWith } from "../../retry.js"
import { attemptDuration, operationDuration } from "../../telemetry.js"
import * as validate from "../../validate.js"
import { ConnectFailed, NoResponse, StatusError } from "../httpErrors.js"
import { detach, fieldsOf, saysInProgress } from "./answer.js"
import { around, originOf } from "./client.js"
import { classifyAny } from "./errors.js"
import { headerName } from "./headers.js"
import { defaultKeyHeader } from "./idempotencyKeys.js"

export interface RetryOptions {
  readonly schedule?: Schedule.Schedule<unknown> | undefined
  readonly maxAttempts?: number | undefined
  readonly maxRetryAfter?: Duration.Input | undefined
  readonly budget?: Budget | undefined
  readonly idempotencyKeyHeader?: string | undefined
  readonly name?: string | undefined
  readonly maxOriginLabels?: number | undefined
}

/** The `client` label of a client without a `name`. */
export const defaultClientName = "default"

/** The origins a client labels its retry metrics with, first come, unless `maxOriginLabels` says otherwise. */
const defaultMaxOriginLabels = 100

/**
 * The retry metrics' series of one client: one per origin for the first `maxOriginLabels` origins it retries
 * or gives up on, then `origin: "other"` — the metric registry keeps every series it was given for the life of the
 * process, so the cap bounds the series, not only the map. A URL without an origin (a relative one, resolved
 * further in) is labelled `"unknown"`.
 */
const seriesPerOrigin = (client: string, maxOriginLabels: number) => {
  const origins = new Map<string, OriginSeries>()
  let other: OriginSeries | undefined
  const make = (origin: string): OriginSeries => ({ retry: seriesWith({ client, origin }), labels: { client, origin } })
  return (url: string): OriginSeries => {
    const origin = originOf(url) || "unknown"
    const known = origins.get(origin)
    if (known !== undefined) return known
    if (origins.size >= maxOriginLabels) return other ??= make("other")
    const series = make(origin)
    origins.set(origin, series)
    return series
  }
}

/** One origin's retry series and the labels its durations carry (the same cap). */
interface OriginSeries {
  readonly retry: Series
  readonly labels: { readonly client: string; readonly origin: string }
}

/**
 * OpenTelemetry's `error.type` of an attempt or a request that ended with `exit`: the status code of an answer
 * of 400 or more (kept or retried), the error's tag otherwise; none for a success.
 */
const errorTypeOf = (exit: Exit.Exit<HttpClientResponse.HttpClientResponse, unknown>): string | undefined => {
  if (Exit.isSuccess(exit)) return exit.value.status >= 400 ? String(exit.value.status) : undefined
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  if (failure === undefined) return exit.cause.reasons.some((r) => r._tag === "Interrupt") ? "interrupted" : "_OTHER"
  let error: unknown = failure.error
  if (typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "Retryable") {
    error = (error as { cause: unknown }).cause
  }
  if (error instanceof StatusError) return String(error.status)
  const tag = typeof error === "object" && error !== null ? (error as { _tag?: unknown })._tag : undefined
  return typeof tag === "string" ? tag : "_OTHER"
}

/** Records the seconds from `start` to now in `histogram`, labelled with the request's and the exit's attributes. */
const observe = (
  histogram: Metric.Histogram<number>,
  labels: OriginSeries["labels"],
  method: string,
  start: number,
  exit: Exit.Exit<HttpClientResponse.HttpClientResponse, unknown>
) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const errorType = errorTypeOf(exit)
    const status = Exit.isSuccess(exit)
      ? exit.value.status
      : (() => {
        const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
        const error = failure === undefined ? undefined : (failure.error as { cause?: unknown }).cause
        return error instanceof StatusError ? error.status : undefined
      })()
    const attributes: Record<string, string> = { ...labels, "http.request.method": method }
    if (status !== undefined) attributes["http.response.status_code"] = String(status)
    if (errorType !== undefined) attributes["error.type"] = errorType
    const spanAttributes: Record<string, unknown> = {}
    if (status !== undefined) spanAttributes["http.response.status_code"] = status
    if (errorType !== undefined) spanAttributes["error.type"] = errorType
    // the span `timed` runs in (the attempt's, or the request's) gets the same outcome
    return Effect.andThen(
      Effect.annotateCurrentSpan(spanAttributes),
      Metric.update(Metric.withAttributes(histogram, attributes), Math.max(0, now - start) / 1000)
    )
  })

/** Runs `effect`, then records its duration in `histogram`, whatever its exit. */
const timed = <R>(
  effect: Effect.Effect<HttpClientResponse.HttpClientResponse, unknown, R>,
  histogram: Metric.Histogram<number>,
  labels: () => OriginSeries["labels"],
  method: string
): Effect.Effect<HttpClientResponse.HttpClientResponse, unknown, R> =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (start) => Effect.onExit(effect, (exit) => observe(histogram, labels(), method, start, exit))
  )

/**
 * The span of one logical request, `ResilientHttpClient.request`: its attempts' spans are its children, and the
 * retry's decisions (`Retry.backoff`, `Retry.exhausted`) its events. No stack trace: it would point here.
 */
export const requestSpan = (client: string, request: HttpClientRequest.HttpClientRequest) =>
  Effect.withSpan("ResilientHttpClient.request", {
    attributes: { "http.request.method": request.method, client, origin: originOf(request.url) || "unknown" }
  }, { captureStackTrace: false })

/**
 * The span of one attempt, `ResilientHttpClient.attempt` (the transport's span, if it makes one, is its child):
 * OpenTelemetry's `http.request.resend_count` on every resend, and the time the fiber's deadline left it.
 */
const attemptSpan = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  method: string,
  resendCount: number
): Effect.Effect<A, E, R> =>
  withDeadline((deadline, now) => {
    const attributes: Record<string, unknown> = { "http.request.method": method }
    if (resendCount > 0) attributes["http.request.resend_count"] = resendCount
    if (deadline !== undefined) attributes["deadline.remaining_ms"] = Math.max(0, deadline - now)
    return Effect.withSpan("ResilientHttpClient.attempt", { attributes }, { captureStackTrace: false })(effect)
  })

/**
 * How long the server asked to wait before this answer is retried: `Retry-After` on 413, 429 and 503; without
 * it, on a 429 or 503 whose `RateLimit` field says the quota is spent (`r=0`), its `t` — the draft lets a
 * client use `t` only when there is no `Retry-After`.
 */
const waitAsked = (response: HttpClientResponse.HttpClientResponse, now: number): number | undefined => {
  const answer = fieldsOf(response, now)
  if (answer.retryAfterMillis !== undefined) {
    return HttpClassify.honoursRetryAfter(response.status) ? answer.retryAfterMillis : undefined
  }
  return Backpressure.isRefusal(response.status)
    ? Backpressure.quotaPauseMillis({ ...answer, status: response.status })
    : undefined
}

type Classified = Retryable<ConnectFailed | NoResponse | StatusError>

const again = (error: StatusError, waitMillis: number | undefined): Classified =>
  waitMillis === undefined ? retryable(error) : retryable(error, waitMillis)

/** A response to retry fails with its detached copy; any other is returned. */
const classifyResponse = (
  response: HttpClientResponse.HttpClientResponse,
  hasKey: boolean
): Effect.Effect<HttpClientResponse.HttpClientResponse, Classified> => {
  const { status } = response
  const retried = HttpClassify.retriesStatus(response.request.method, status, hasKey)
  // a 409 for a keyed request: the first attempt with this key may still be running (its Retry-After says when to
  // ask again), and a new key would run it twice
  const conflict = status === 409 && hasKey
  if (!retried && !conflict) return Effect.succeed(response)
  return Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const wait = waitAsked(response, now) ?? (conflict ? fieldsOf(response, now).retryAfterMillis : undefined)
    // the connection goes back to the pool before the backoff
    return Effect.flatMap(detach(response), ({ bytes, copy }) => {
      if (conflict && wait === undefined && !saysInProgress(copy, bytes)) return Effect.succeed(copy)
      return Effect.fail(again(new StatusError({ status, response: copy }), wait))
    })
  })
}

/** A failure that is worth sending again, as `Retryable`; any other as it is. */
const classifyFailure = <E>(error: E, hasKey: boolean, request: HttpClientRequest.HttpClientRequest) => {
  const known = classifyAny(error)
  if (known instanceof ConnectFailed) return retryable(known)
  if (!(known instanceof NoResponse)) return known
  const decision = HttpClassify.classify({
    method: request.method,
    outcome: HttpClassify.unknownOutcome,
    hasIdempotencyKey: hasKey
  })
  return decision === "retry" ? retryable(known) : known
}

export const resolveRetry = (options: RetryOptions | undefined) => {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    validate.invalid("ResilientHttpClient retry options must be an object or false")
  }
  const budget = options?.budget
  if (budget !== undefined && (budget === null || typeof budget.unsafeRecordFailure !== "function")) {
    validate.invalid("ResilientHttpClient retry budget must be a RetryBudget.Budget")
  }
  const name = options?.name ?? defaultClientName
  if (typeof name !== "string" || name === "") validate.invalid("ResilientHttpClient name must be a non-empty string")
  const maxOriginLabels = options?.maxOriginLabels ?? defaultMaxOriginLabels
  if (!(maxOriginLabels === Infinity || (Number.isInteger(maxOriginLabels) && maxOriginLabels >= 0))) {
    validate.invalid(`ResilientHttpClient retry.maxOriginLabels must be an integer >= 0, got ${maxOriginLabels}`)
  }
  return {
    name,
    maxOriginLabels,
    policy: compileCounting({
      schedule: options?.schedule ?? fullJitter({ base: "100 millis", cap: "5 seconds" }),
      maxAttempts: options?.maxAttempts ?? 3,
      ...(options?.maxRetryAfter === undefined ? {} : { maxRetryAfter: options.maxRetryAfter }),
      ...(budget === undefined ? {} : { budget })
    }),
    keyHeader: headerName("retry.idempotencyKeyHeader", options?.idempotencyKeyHeader ?? defaultKeyHeader)
  }
}

export const retry = (options?: RetryOptions) => {
  const { keyHeader, maxOriginLabels, name, policy } = resolveRetry(options)
  return <E, R>(self: HttpClient.HttpClient.With<E, R>) => {
    // this client's series, made with the client
    const seriesOf = seriesPerOrigin(name, maxOriginLabels)
    return around(self, (request, execute) => {
      const hasKey = request.headers[keyHeader] !== undefined
      let origin: OriginSeries | undefined
      const ofOrigin = () => origin ??= seriesOf(request.url)
      const labels = () => ofOrigin().labels
      let sent = 0
      // `http_client_request_duration_seconds`: one sample per attempt, whatever it met inside (breaker, limiter)
      const attempt = Effect.suspend(() =>
        attemptSpan(
          timed(
            Effect.matchEffect(execute(request), {
              onFailure: (error) => Effect.fail(classifyFailure(error, hasKey, request)),
              onSuccess: (response) => classifyResponse(response, hasKey)
            }),
            attemptDuration,
            labels,
            request.method
          ),
          request.method,
          sent++
        )
      )
      const series = () => ofOrigin().retry
      // `effect_resilience_http_client_operation_duration_seconds`: the logical request, backoffs included
      return timed(policy(attempt, series), operationDuration, labels, request.method).pipe(
        requestSpan(name, request)
      ) as Effect.Effect<HttpClientResponse.HttpClientResponse, unknown, R>
    })
  }
}
