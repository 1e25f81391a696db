import { HttpClient, type HttpClientError, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Cause, Clock, Context, Duration, Effect, Exit, FiberRef, Layer, Option, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Backpressure from "../../core/backpressure.js"
import * as DeadlineHeader from "../../core/deadlineHeader.js"
import * as HttpClassify from "../../core/httpClassify.js"
import { parseRateLimit } from "../../core/rateLimitHeaders.js"
import type { Options, ResilientError, ResilientHttpClient as Client } from "../../http/ResilientHttpClient.js"
import * as adaptiveThrottle from "../adaptiveThrottle.js"
import { fullJitter } from "../backoff.js"
import { keyed } from "../circuitBreaker/keyed.js"
import { currentCriticality, headerName as criticalityHeaderName } from "../criticality.js"
import { type AttemptTimeout, DeadlineExceeded, timeoutOf as attemptTimeout, withDeadline } from "../deadline.js"
import { isFatal, isRetryable, type Retryable, retryable as toRetryable } from "../failure.js"
import { compile as retryWith } from "../retry.js"
import { RetryBudget, unsafeMake as makeBudget } from "../retryBudget.js"
import * as validate from "../validate.js"
import { defaultHeader } from "./deadlineMiddleware.js"
import { ConnectFailed, NoResponse, StatusError } from "./httpErrors.js"
import { parse as parseRetryAfter } from "./retryAfter.js"

export const ResilientHttpClient: Context.Tag<Client, Client> = Context.GenericTag<Client>(
  "effect-resilience/ResilientHttpClient"
)

type AttemptError =
  | HttpClientError.HttpClientError
  | ConnectFailed
  | NoResponse
  | DeadlineExceeded
  | Retryable<ConnectFailed | NoResponse | StatusError>

/**
 * What trips the per-origin breaker by default: every failure except `Fatal` (as the breaker's own default)
 * and except a status that is no outage (429: the server is throttling, and the retry already honours it).
 */
const countsAsOutage = (error: unknown): boolean =>
  !isFatal(error) &&
  !(isRetryable(error) && error.cause instanceof StatusError && !HttpClassify.statusIsOutage(error.cause.status))

/** The server's `Retry-After` on a failure the breaker counts, capped at a minute, so the breaker honours it too. */
const retryAfterOf = (error: unknown): Duration.Duration | undefined =>
  isRetryable(error) && error.retryAfter !== undefined ? Duration.min(error.retryAfter, Duration.minutes(1)) : undefined

export const classifyTransportError = (
  error: HttpClientError.HttpClientError
): HttpClientError.HttpClientError | ConnectFailed | NoResponse => {
  if (error._tag !== "RequestError" || error.reason !== "Transport") return error
  const reason = HttpClassify.connectFailureReason(error.cause)
  return reason !== undefined
    ? new ConnectFailed({ reason, request: error.request, cause: error.cause })
    : new NoResponse({ reason: "reset", request: error.request, cause: error.cause })
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

const headerName = (name: string, value: unknown): string => {
  if (typeof value !== "string" || value === "") validate.invalid(`ResilientHttpClient ${name} must be a header name`)
  return (value as string).toLowerCase()
}

/** Options checked when `make` is called, as every constructor of the library does. */
const resolve = (options: Options) => {
  if (typeof options !== "object" || options === null) validate.invalid("ResilientHttpClient options must be an object")
  const attemptMillis = validate.millis("ResilientHttpClient attemptTimeout", options.attemptTimeout ?? "10 seconds")
  const retry = options.retry === false ? undefined : retryWith({
    schedule: options.retry?.schedule ?? fullJitter({ base: "100 millis", cap: "5 seconds" }),
    maxAttempts: options.retry?.maxAttempts ?? 3,
    ...(options.retry?.maxRetryAfter === undefined ? {} : { maxRetryAfter: options.retry.maxRetryAfter })
  })
  const budget = options.retry === false || options.retry?.budget === undefined
    ? undefined
    : makeBudget(options.retry.budget)
  const breakers = options.breaker === undefined
    ? undefined
    : keyed<string>({ isFailure: countsAsOutage, openForAtLeast: retryAfterOf, ...options.breaker })
  if (options.connectTimeout !== undefined) {
    validate.millis("ResilientHttpClient connectTimeout", options.connectTimeout)
  }
  const limiter = options.rateLimiter
  if (limiter !== undefined && (limiter === null || typeof limiter.acquire !== "function")) {
    validate.invalid("ResilientHttpClient rateLimiter must be a RateLimiter")
  }
  const keys = options.idempotencyKeys
  const methods = keys === false ? [] : keys?.methods ?? ["POST", "PATCH"]
  if (!Array.isArray(methods) || !methods.every((m) => typeof m === "string")) {
    validate.invalid("ResilientHttpClient idempotencyKeys.methods must be an array of method names")
  }
  const keyMethods = new Set(methods.map((m) => m.toUpperCase()))
  const keyHeader = keys === false ? undefined : headerName("idempotencyKeys.header", keys?.header ?? "Idempotency-Key")
  const deadlineHeader = options.deadlineHeader === false
    ? undefined
    : headerName("deadlineHeader", options.deadlineHeader ?? defaultHeader)
  const criticalityHeader = options.criticalityHeader === false
    ? undefined
    : headerName("criticalityHeader", options.criticalityHeader ?? criticalityHeaderName)
  const throttle = options.throttle === undefined || options.throttle === false
    ? undefined
    : adaptiveThrottle.make({ isAccepted, ...(options.throttle === true ? {} : options.throttle) })
  const maxPauseMillis = options.sharedBackpressure === false
    ? undefined
    : validate.millis(
      "ResilientHttpClient maxRetryAfter",
      (options.retry === false ? undefined : options.retry?.maxRetryAfter) ?? "60 seconds"
    )
  return {
    attemptMillis,
    retry,
    budget,
    breakers,
    limiter,
    keyMethods,
    keyHeader,
    deadlineHeader,
    criticalityHeader,
    throttle,
    maxPauseMillis
  }
}

/**
 * What the adaptive throttle counts as accepted: an answer, unless it is a 429 or 503 (the server refusing for
 * load). Connection failures, timeouts and refusals are not; a breaker or limiter refusal says nothing.
 */
const isAccepted = (exit: Exit.Exit<unknown, unknown>): boolean | undefined => {
  if (Exit.isSuccess(exit)) return true
  const failure = Cause.failureOption(exit.cause)
  if (Option.isNone(failure)) return undefined
  const error = isRetryable(failure.value) ? failure.value.cause : failure.value
  if (error instanceof StatusError) return !Backpressure.pausesOrigin(error.status)
  return error instanceof ConnectFailed || error instanceof NoResponse ? false : undefined
}

export const make = (options: Options = {}) => {
  const resolved = resolve(options)
  return Effect.gen(function*() {
    const underlying = yield* HttpClient.HttpClient
    const { attemptMillis, budget, criticalityHeader, deadlineHeader, keyHeader, keyMethods, limiter, retry } = resolved
    const { maxPauseMillis } = resolved
    const timeout = attemptTimeout(attemptMillis)
    const breakers = resolved.breakers === undefined ? undefined : yield* resolved.breakers
    const throttle = resolved.throttle === undefined ? undefined : yield* resolved.throttle

    /** Per origin, the instant until which the server asked every caller to hold off. */
    const pausedUntil = new Map<string, number>()
    const notePause = (origin: string, response: HttpClientResponse.HttpClientResponse, now: number) => {
      if (maxPauseMillis === undefined) return
      const header = response.headers["retry-after"]
      const retryAfter = header === undefined ? undefined : Option.getOrUndefined(parseRetryAfter(header, now))
      const rateLimit = response.headers["ratelimit"]
      const pause = Backpressure.pauseMillis(
        response.status,
        retryAfter === undefined ? undefined : Duration.toMillis(retryAfter),
        rateLimit === undefined ? undefined : parseRateLimit(rateLimit),
        maxPauseMillis
      )
      if (pause === undefined) return
      if (pausedUntil.size >= 10_000) {
        for (const [key, until] of pausedUntil) if (until <= now) pausedUntil.delete(key)
      }
      pausedUntil.set(origin, Math.max(pausedUntil.get(origin) ?? 0, now + pause))
    }

    /** Whether a response asks for a retry (a retryable status, for a request that may be repeated). */
    const retried = (response: HttpClientResponse.HttpClientResponse, hasKey: boolean): boolean =>
      HttpClassify.retriesStatus(response.request.method, response.status, hasKey)

    const classifyResponse = (
      response: HttpClientResponse.HttpClientResponse,
      hasKey: boolean,
      now: number
    ): Effect.Effect<HttpClientResponse.HttpClientResponse, AttemptError> => {
      if (!retried(response, hasKey)) return Effect.succeed(response)
      const status = response.status
      const header = response.headers["retry-after"]
      const retryAfter = header !== undefined && HttpClassify.honoursRetryAfter(status)
        ? parseRetryAfter(header, now)
        : Option.none()
      const error = new StatusError({ status, response })
      return Effect.fail(Option.isSome(retryAfter) ? toRetryable(error, retryAfter.value) : toRetryable(error))
    }

    const classifyError = (
      error: HttpClientError.HttpClientError | AttemptTimeout | DeadlineExceeded,
      request: HttpClientRequest.HttpClientRequest,
      hasKey: boolean
    ): AttemptError => {
      if (error._tag === "DeadlineExceeded") return error
      const classified = error._tag === "AttemptTimeout"
        ? new NoResponse({ reason: "read-timeout", request, cause: error })
        : classifyTransportError(error)
      if (classified._tag === "ConnectFailed") return toRetryable(classified)
      if (classified._tag !== "NoResponse") return classified
      const decision = HttpClassify.classify({
        method: request.method,
        outcome: HttpClassify.unknownOutcome,
        hasIdempotencyKey: hasKey
      })
      return decision === "retry" ? toRetryable(classified) : classified
    }

    const send = (request: HttpClientRequest.HttpClientRequest, hasKey: boolean, origin: string) =>
      withDeadline((deadline, now) => {
        const value = deadlineHeader === undefined
          ? undefined
          : DeadlineHeader.clientValue(attemptMillis, deadline, now)
        const sent = value === undefined ? request : HttpClientRequest.setHeader(request, deadlineHeader!, value)
        return underlying.execute(sent).pipe(
          Effect.tap((response) =>
            maxPauseMillis === undefined
              ? Effect.void
              : Effect.flatMap(Clock.currentTimeMillis, (at) => Effect.sync(() => notePause(origin, response, at)))
          ),
          // a response to retry lets its connection go now, within the attempt's time
          Effect.flatMap((response) => retried(response, hasKey) ? detach(response) : Effect.succeed(response)),
          timeout,
          Effect.matchEffect({
            onFailure: (error) => Effect.fail(classifyError(error, request, hasKey)),
            onSuccess: (response) =>
              Effect.flatMap(Clock.currentTimeMillis, (at) => classifyResponse(response, hasKey, at))
          })
        )
      })

    /**
     * Waits out the origin's pause, or gives up at once when the deadline ends first. It runs before the limiter,
     * the throttle and the breaker, so the wait is neither paced, counted nor timed as part of the call.
     */
    const holdFor = (origin: string): Effect.Effect<void, DeadlineExceeded> =>
      withDeadline((deadline, now) => {
        const hold = Backpressure.hold(pausedUntil.get(origin), now, deadline)
        switch (hold._tag) {
          case "Go":
            return Effect.void
          case "Wait":
            return Effect.sleep(Duration.millis(hold.millis))
          case "GiveUp":
            return Effect.fail(new DeadlineExceeded())
        }
      })

    const execute = (request: HttpClientRequest.HttpClientRequest) => {
      const existing = keyHeader === undefined ? undefined : request.headers[keyHeader]
      const key = existing ?? (keyHeader !== undefined && keyMethods.has(request.method) ? randomUUID() : undefined)
      const keyed = key === undefined || existing !== undefined
        ? request
        : HttpClientRequest.setHeader(request, keyHeader!, key)
      const hasKey = key !== undefined
      const origin = originOf(keyed.url)
      const marked = criticalityHeader === undefined ? Effect.succeed(keyed) : Effect.map(
        FiberRef.get(currentCriticality),
        (level) => HttpClientRequest.setHeader(keyed, criticalityHeader, level)
      )
      let once: Effect.Effect<HttpClientResponse.HttpClientResponse, any> = Effect.flatMap(
        marked,
        (request) => send(request, hasKey, origin)
      )
      if (breakers !== undefined) once = breakers.protect(once, origin)
      if (throttle !== undefined) once = throttle.protect(once, origin)
      if (limiter !== undefined) once = Effect.zipRight(limiter.acquire(origin), once)
      if (maxPauseMillis !== undefined) once = Effect.zipRight(holdFor(origin), once)
      const result = retry === undefined
        ? Effect.catchIf(once, isRetryable, (e) => Effect.fail(e.cause))
        : budget === undefined
        ? retry(once)
        : Effect.provideService(retry(once), RetryBudget, budget)
      return result as Effect.Effect<HttpClientResponse.HttpClientResponse, ResilientError>
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
