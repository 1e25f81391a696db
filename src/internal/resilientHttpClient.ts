import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Clock, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import * as Backoff from "../Backoff.js"
import * as CircuitBreaker from "../CircuitBreaker.js"
import * as Deadline from "../Deadline.js"
import * as Failure from "../Failure.js"
import { defaultHeader } from "../http/DeadlineMiddleware.js"
import * as HttpClassify from "../http/HttpClassify.js"
import { ConnectFailed, connectFailureReason, StatusError, UnknownOutcome } from "../http/HttpErrors.js"
import type { Options, ResilientError } from "../http/ResilientHttpClient.js"
import { ResilientHttpClient } from "../http/ResilientHttpClient.js"
import * as RetryAfter from "../http/RetryAfter.js"
import * as Retry from "../Retry.js"
import * as RetryBudget from "../RetryBudget.js"
import { withDeadline } from "./deadline.js"
import * as validate from "./validate.js"

type AttemptError =
  | HttpClientError.HttpClientError
  | ConnectFailed
  | UnknownOutcome
  | Deadline.DeadlineExceeded
  | Failure.Retryable<ConnectFailed | UnknownOutcome | StatusError>

/** Statuses whose Retry-After is honoured (RFC 9110 names 503 and 3xx; RFC 6585 429; 413 as urllib3 does). */
const retryAfterStatuses = new Set([413, 429, 503])

/**
 * What trips the per-origin breaker by default: every failure except `Fatal` (as the breaker's own default)
 * and except 429 — a server that throttles is working as designed, and the retry already honours it.
 */
const countsAsOutage = (error: unknown): boolean =>
  !Failure.isFatal(error) &&
  !(Failure.isRetryable(error) && error.cause instanceof StatusError && error.cause.status === 429)

export const classifyTransportError = (
  error: HttpClientError.HttpClientError
): HttpClientError.HttpClientError | ConnectFailed | UnknownOutcome => {
  if (error._tag !== "RequestError" || error.reason !== "Transport") return error
  const reason = connectFailureReason(error.cause)
  return reason !== undefined
    ? new ConnectFailed({ reason, request: error.request, cause: error.cause })
    : new UnknownOutcome({ reason: "reset", request: error.request, cause: error.cause })
}

export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const underlying = yield* HttpClient.HttpClient
    const attemptMillis = validate.millis("ResilientHttpClient attemptTimeout", options.attemptTimeout ?? "10 seconds")
    const timeout = Deadline.timeout(attemptMillis)
    const retry = options.retry === false ? undefined : Retry.retry({
      schedule: options.retry?.schedule ?? Backoff.fullJitter({ base: "100 millis", cap: "5 seconds" }),
      maxAttempts: options.retry?.maxAttempts ?? 3,
      ...(options.retry?.maxRetryAfter === undefined ? {} : { maxRetryAfter: options.retry.maxRetryAfter })
    })
    const budget = options.retry === false || options.retry?.budget === undefined
      ? undefined
      : RetryBudget.unsafeMake(options.retry.budget)
    const breakers = options.breaker === undefined
      ? undefined
      : yield* CircuitBreaker.keyed<string>({ isFailure: countsAsOutage, ...options.breaker })
    const limiter = options.rateLimiter
    const keyMethods = options.idempotencyKeys === false
      ? new Set<string>()
      : new Set((options.idempotencyKeys?.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
    const keyHeader = options.idempotencyKeys === false
      ? undefined
      : (options.idempotencyKeys?.header ?? "Idempotency-Key").toLowerCase()
    const deadlineHeader = options.deadlineHeader === false ? undefined : (options.deadlineHeader ?? defaultHeader)

    const classifyResponse = (
      response: HttpClientResponse.HttpClientResponse,
      hasKey: boolean,
      now: number
    ): Effect.Effect<HttpClientResponse.HttpClientResponse, AttemptError> => {
      const status = response.status
      if (!HttpClassify.isRetryableStatus(status)) return Effect.succeed(response)
      const decision = HttpClassify.classify({
        method: response.request.method,
        outcome: HttpClassify.status(status),
        hasIdempotencyKey: hasKey
      })
      if (decision === "fatal") return Effect.succeed(response)
      const header = response.headers["retry-after"]
      const retryAfter = header !== undefined && retryAfterStatuses.has(status)
        ? RetryAfter.parse(header, now)
        : Option.none()
      const error = new StatusError({ status, response })
      return Effect.fail(
        Option.isSome(retryAfter) ? Failure.retryable(error, retryAfter.value) : Failure.retryable(error)
      )
    }

    const classifyError = (
      error: HttpClientError.HttpClientError | Deadline.AttemptTimeout | Deadline.DeadlineExceeded,
      request: HttpClientRequest.HttpClientRequest,
      hasKey: boolean
    ): AttemptError => {
      if (error._tag === "DeadlineExceeded") return error
      const classified = error._tag === "AttemptTimeout"
        ? new UnknownOutcome({ reason: "read-timeout", request, cause: error })
        : classifyTransportError(error)
      if (classified._tag === "ConnectFailed") return Failure.retryable(classified)
      if (classified._tag !== "UnknownOutcome") return classified
      const decision = HttpClassify.classify({
        method: request.method,
        outcome: HttpClassify.unknownOutcome,
        hasIdempotencyKey: hasKey
      })
      return decision === "retry" ? Failure.retryable(classified) : classified
    }

    const attempt = (request: HttpClientRequest.HttpClientRequest, hasKey: boolean) =>
      withDeadline((deadline, now) => {
        const budget = deadline === undefined ? attemptMillis : Math.min(attemptMillis, deadline - now)
        // whole milliseconds, rounded down (never promise the server more time than the client waits);
        // no header when there is no finite budget
        const sent = deadlineHeader === undefined || !Number.isFinite(budget)
          ? request
          : HttpClientRequest.setHeader(request, deadlineHeader, String(Math.max(0, Math.floor(budget))))
        return underlying.execute(sent).pipe(
          timeout,
          Effect.matchEffect({
            onFailure: (error) => Effect.fail(classifyError(error, request, hasKey)),
            onSuccess: (response) =>
              Effect.flatMap(Clock.currentTimeMillis, (at) => classifyResponse(response, hasKey, at))
          })
        )
      })

    const execute = (request: HttpClientRequest.HttpClientRequest) => {
      const existing = keyHeader === undefined ? undefined : request.headers[keyHeader]
      const key = existing ?? (keyHeader !== undefined && keyMethods.has(request.method) ? randomUUID() : undefined)
      const keyed = key === undefined || existing !== undefined
        ? request
        : HttpClientRequest.setHeader(request, keyHeader!, key)
      const hasKey = key !== undefined
      const origin = originOf(keyed.url)
      let once: Effect.Effect<HttpClientResponse.HttpClientResponse, any> = attempt(keyed, hasKey)
      if (breakers !== undefined) once = breakers.protect(origin, once)
      if (limiter !== undefined) once = Effect.zipRight(limiter.acquire(origin), once)
      const retried = retry === undefined
        ? Effect.catchIf(once, Failure.isRetryable, (e) => Effect.fail(e.cause))
        : budget === undefined
        ? retry(once)
        : Effect.provideService(retry(once), RetryBudget.RetryBudget, budget)
      return retried as Effect.Effect<HttpClientResponse.HttpClientResponse, ResilientError>
    }

    return HttpClient.makeWith(
      (request: Effect.Effect<HttpClientRequest.HttpClientRequest, ResilientError>) => Effect.flatMap(request, execute),
      Effect.succeed
    )
  })

const originOf = (url: string): string => {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}

export const layer = (options?: Options) => Layer.scoped(ResilientHttpClient, make(options))
