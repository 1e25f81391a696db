import { HttpClient, type HttpClientError, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Clock, Effect, Layer, Option, Stream } from "effect"
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

/**
 * The most of a retried response's body kept in memory. The rest is not read: the response is rebuilt from
 * what was kept, so the connection goes back to the pool (or is closed) at once instead of staying busy
 * until the body is garbage collected, and the caller can still read an error body of a usual size.
 */
const RETAINED_BODY_BYTES = 64 * 1024

/**
 * Reads at most `RETAINED_BODY_BYTES` of the body (stopping the stream there releases the connection) and
 * returns the response rebuilt around them. A body that fails to read is left empty.
 */
const detach = (response: HttpClientResponse.HttpClientResponse) =>
  response.stream.pipe(
    Stream.runFoldWhile(
      { parts: [] as Array<Uint8Array>, size: 0 },
      (acc) => acc.size < RETAINED_BODY_BYTES,
      (acc, chunk) => {
        acc.parts.push(chunk.subarray(0, RETAINED_BODY_BYTES - acc.size))
        return { parts: acc.parts, size: acc.size + Math.min(chunk.byteLength, RETAINED_BODY_BYTES - acc.size) }
      }
    ),
    Effect.orElseSucceed(() => ({ parts: [] as Array<Uint8Array>, size: 0 })),
    Effect.map(({ parts }) => {
      const headers = new Headers()
      for (const [name, value] of Object.entries(response.headers)) headers.set(name, value)
      const body = response.status === 204 || response.status === 304 ? null : new Blob(parts)
      return HttpClientResponse.fromWeb(
        response.request,
        new Response(body, { status: response.status, headers })
      )
    })
  )

/** Options checked when `make` is called, as every constructor of the library does. */
const resolve = (options: Options) => {
  const attemptMillis = validate.millis("ResilientHttpClient attemptTimeout", options.attemptTimeout ?? "10 seconds")
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
    : CircuitBreaker.keyed<string>({ isFailure: countsAsOutage, ...options.breaker })
  if (options.connectTimeout !== undefined) {
    validate.millis("ResilientHttpClient connectTimeout", options.connectTimeout)
  }
  return { attemptMillis, retry, budget, breakers }
}

export const make = (options: Options = {}) => {
  const resolved = resolve(options)
  return Effect.gen(function*() {
    const underlying = yield* HttpClient.HttpClient
    const { attemptMillis, budget, retry } = resolved
    const timeout = Deadline.timeout(attemptMillis)
    const breakers = resolved.breakers === undefined ? undefined : yield* resolved.breakers
    const limiter = options.rateLimiter
    const keyMethods = options.idempotencyKeys === false
      ? new Set<string>()
      : new Set((options.idempotencyKeys?.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
    const keyHeader = options.idempotencyKeys === false
      ? undefined
      : (options.idempotencyKeys?.header ?? "Idempotency-Key").toLowerCase()
    const deadlineHeader = options.deadlineHeader === false ? undefined : (options.deadlineHeader ?? defaultHeader)

    /** Whether a response asks for a retry (a retryable status, for a request that may be repeated). */
    const retryable = (response: HttpClientResponse.HttpClientResponse, hasKey: boolean): boolean =>
      HttpClassify.isRetryableStatus(response.status) &&
      HttpClassify.classify({
          method: response.request.method,
          outcome: HttpClassify.status(response.status),
          hasIdempotencyKey: hasKey
        }) === "retry"

    const classifyResponse = (
      response: HttpClientResponse.HttpClientResponse,
      hasKey: boolean,
      now: number
    ): Effect.Effect<HttpClientResponse.HttpClientResponse, AttemptError> => {
      if (!retryable(response, hasKey)) return Effect.succeed(response)
      const status = response.status
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
          // a response to retry lets its connection go now, within the attempt's time
          Effect.flatMap((response) => retryable(response, hasKey) ? detach(response) : Effect.succeed(response)),
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
      if (breakers !== undefined) once = breakers.protect(once, origin)
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
}

const originOf = (url: string): string => {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}

export const layer = (options?: Options) => Layer.scoped(ResilientHttpClient, make(options))
