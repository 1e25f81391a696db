/**
 * A resilient `HttpClient`, made of one combinator per policy over `HttpClient.HttpClient.With<E, R>`, in the
 * style of `effect/http`'s own `HttpClient.retry` and `filterStatusOk`. Each holds the HTTP classification it
 * needs; compose them in the order you want.
 *
 * {@link make} (and {@link layer}) is the preset: one option object, one pipe of those combinators. That pipe, in
 * `src/internal/http/resilientHttpClient/make.ts`, is the order of the layers (docs/http-client.md shows it, and a
 * test keeps this list in step). From the transport out, so a request meets them from the last to the first:
 * {@link classifyTransportErrors}, {@link deadlineHeader}, {@link criticalityHeader}, {@link attemptTimeout},
 * {@link circuitBreaker}, {@link adaptiveThrottle}, {@link rateLimiter}, {@link sharedBackpressure},
 * {@link retry} (with its budget) and {@link idempotencyKeys}.
 *
 * @since 1.0.0
 */
import type { Cause, Context, Duration, Effect, Layer, Option, Schedule, Scope } from "effect"
import type { HttpClient, HttpClientError } from "effect/http"
import type * as AdaptiveThrottle from "./AdaptiveThrottle.js"
import type { CircuitOpen, Keyed, KeyedOptions } from "./CircuitBreaker.js"
import type { DeadlineExceeded } from "./Deadline.js"
import type { ConnectFailed, NoResponse, StatusError } from "./HttpErrors.js"
import type { Fields } from "./internal/errorFields.js"
import * as timeout from "./internal/http/resilientHttpClient/attemptTimeout.js"
import * as errors from "./internal/http/resilientHttpClient/errors.js"
import * as guards from "./internal/http/resilientHttpClient/guards.js"
import * as headers from "./internal/http/resilientHttpClient/headers.js"
import * as keys from "./internal/http/resilientHttpClient/idempotencyKeys.js"
import * as internal from "./internal/http/resilientHttpClient/make.js"
import * as retries from "./internal/http/resilientHttpClient/retry.js"
import * as backpressure from "./internal/http/resilientHttpClient/sharedBackpressure.js"
import type { RateLimited, RateLimiter } from "./RateLimiter.js"
import type { RetriesExhausted } from "./Retry.js"
import type * as RetryBudget from "./RetryBudget.js"

type Client<E, R> = HttpClient.HttpClient.With<E, R>

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /**
   * The client's name: the `client` label of its retry metrics (`Retry.retriesTotal`, `Retry.exhaustedTotal`),
   * which also carry the `origin`. Give each client its own. Default `"default"`.
   */
  readonly name?: string
  /** Each attempt's timeout, clipped to the deadline; it covers reading the body. Default 10 seconds. */
  readonly attemptTimeout?: Duration.Input
  /**
   * Retries ({@link retry}). Default: `Backoff.fullJitter({ base: "100 millis", cap: "5 seconds" })`, 3 attempts,
   * Retry-After up to 60 s. `budget` is a `RetryBudget` for this client: its options (made with the client) or a
   * ready `RetryBudget.Budget` (shared by whoever holds it); without it, a `RetryBudget` in the caller's context is
   * used. `maxOriginLabels`: see {@link RetryOptions}. `false` turns retrying off: every answer is returned as it is.
   */
  readonly retry?: false | {
    readonly schedule?: Schedule.Schedule<unknown>
    readonly maxAttempts?: number
    readonly maxRetryAfter?: Duration.Input
    readonly budget?: RetryBudget.Options | RetryBudget.Budget
    readonly maxOriginLabels?: number
  }
  /**
   * A circuit breaker per origin ({@link circuitBreaker}): its options, or a ready `CircuitBreaker.Keyed<string>`
   * shared with other clients. Built from options, 429 answers do not count as failures unless you pass
   * `isFailure`, and a `Retry-After` longer than `openFor` keeps it open that long (at most a minute) unless you
   * pass `openForAtLeast`. The client's `breakers` field gives them back. Default: none.
   */
  readonly breaker?: KeyedOptions | Keyed<string>
  /** A limiter keyed by origin that every attempt waits for ({@link rateLimiter}). Default: none. */
  readonly rateLimiter?: RateLimiter
  /**
   * Idempotency keys ({@link idempotencyKeys}): POST and PATCH get a UUID v4 in `Idempotency-Key`, one per request
   * value, unless they carry one. `false` turns them off.
   */
  readonly idempotencyKeys?: false | IdempotencyKeysOptions
  /** The header of {@link deadlineHeader}, or `false`. Default `Request-Timeout-Ms` (`DeadlineMiddleware`). */
  readonly deadlineHeader?: false | string
  /** The header of {@link criticalityHeader}, or `false`. Default `Request-Criticality` (`LoadShedMiddleware`). */
  readonly criticalityHeader?: false | string
  /**
   * Client-side adaptive throttling per origin ({@link adaptiveThrottle}): `true` for the defaults (`k = 2`, a
   * two-minute window), or its options. Default: off.
   */
  readonly throttle?: boolean | AdaptiveThrottle.Options
  /** Shared backpressure per origin ({@link sharedBackpressure}): on by default, `false` turns it off. */
  readonly sharedBackpressure?: boolean | BackpressureOptions
}

/**
 * A call gave up because its origin asked every caller to hold off until after the call's deadline
 * ({@link sharedBackpressure}); `retryAfter` is what was left of the pause.
 *
 * @since 1.0.0
 * @category errors
 */
export const OriginPaused: new(args: Fields<OriginPaused>) => OriginPaused = errors.OriginPaused

/**
 * @since 1.0.0
 * @category errors
 */
export interface OriginPaused extends Cause.YieldableError {
  readonly _tag: "OriginPaused"
  /** The origin (scheme, host and port) that asked to hold off. */
  readonly origin: string
  readonly retryAfter: Duration.Duration
}

/**
 * Everything the resilient client can fail with. `StatusError` is the `last` of `RetriesExhausted`.
 *
 * @since 1.0.0
 * @category models
 */
export type ResilientError =
  | HttpClientError.HttpClientError
  | ConnectFailed
  | NoResponse
  | RetriesExhausted<ConnectFailed | NoResponse | StatusError>
  | CircuitOpen
  | RateLimited
  | DeadlineExceeded
  | LocallyRejected
  | OriginPaused

type LocallyRejected = AdaptiveThrottle.LocallyRejected

/**
 * The client `make` builds. `breakers` are its circuit breakers (one per origin), to read and control — `state`,
 * `isolate`, `reset` — or `Option.none()` without the `breaker` option.
 *
 * @since 1.0.0
 * @category models
 */
export interface ResilientHttpClient extends Client<ResilientError, never> {
  readonly breakers: Option.Option<Keyed<string>>
}

/**
 * The service of a resilient client (a `Context.Service`; a `Context.Tag` in the Effect 3 edition).
 *
 * @since 1.0.0
 * @category tags
 */
export const ResilientHttpClient: Context.Service<ResilientHttpClient, ResilientHttpClient> =
  internal.ResilientHttpClient

/**
 * The preset: wraps the `HttpClient` in the context in every policy of `options`, composed in one pipe. Throws
 * `IllegalArgumentError` for invalid options when called (not when the effect runs), like every constructor of
 * the library. All the client's state — breakers, budget, throttle, pauses, keys — is made when the effect runs:
 * build the client once and share it (provide its layer once), or each build starts from nothing.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpClientRequest } from "effect/http"
 * import { CircuitBreaker, Deadline, ResilientHttpClient } from "effect-resilience"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* ResilientHttpClient.make({
 *     attemptTimeout: "2 seconds",
 *     retry: { maxAttempts: 4 },
 *     breaker: { trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }
 *   })
 *   const response = yield* client.execute(
 *     HttpClientRequest.post("http://127.0.0.1:8080/orders").pipe(HttpClientRequest.bodyJsonUnsafe({ sku: "A" }))
 *   )
 *   return response.status
 * }).pipe(Deadline.within("5 seconds"), Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (
  options?: Options
) => Effect.Effect<ResilientHttpClient, never, HttpClient.HttpClient | Scope.Scope> = internal.make

/**
 * {@link make} as a layer over the `HttpClient` you provide; the client is built (its state made) when the layer is.
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: (options?: Options) => Layer.Layer<ResilientHttpClient, never, HttpClient.HttpClient> =
  internal.layer

/**
 * The resilient client's transport error classification, for use with your own client: an `HttpClientError` whose
 * `reason` is a `TransportError` becomes {@link ConnectFailed} or {@link NoResponse}; any other error is returned
 * as it is.
 *
 * @since 1.0.0
 * @category classification
 */
export const classifyTransportError: (
  error: HttpClientError.HttpClientError
) => HttpClientError.HttpClientError | ConnectFailed | NoResponse = errors.classifyTransportError

/**
 * The same as a combinator, next to the transport: what is known about a failed request (never sent, or maybe
 * run) instead of the socket error. {@link retry} classifies raw transport errors itself.
 *
 * @since 1.0.0
 * @category combinators
 */
export const classifyTransportErrors: <E, R>(self: Client<E, R>) => Client<E | ConnectFailed | NoResponse, R> =
  errors.classifyTransportErrors

/**
 * Each attempt — send, headers, body — within `timeout`, clipped to the fiber's deadline. Running out while waiting
 * for the answer fails with `NoResponse` (reason `"read-timeout"`: the server may have run it), or
 * `DeadlineExceeded` when the deadline ran out first. The response's body reads end at the same instant; one that
 * does not fails with an `HttpClientError` (reason `DecodeError`) whose `cause` is that `NoResponse` (a read started later gets a whole
 * `timeout` of its own), so a stalled or trickling body never hangs the caller.
 *
 * @since 1.0.0
 * @category combinators
 */
export const attemptTimeout: {
  (timeout: Duration.Input): <E, R>(self: Client<E, R>) => Client<E | NoResponse | DeadlineExceeded, R>
  <E, R>(self: Client<E, R>, timeout: Duration.Input): Client<E | NoResponse | DeadlineExceeded, R>
} = timeout.attemptTimeout

/**
 * @since 1.0.0
 * @category models
 */
export interface RetryOptions {
  /**
   * The delays, any `Schedule` (only its delays count); default
   * `Backoff.fullJitter({ base: "100 millis", cap: "5 seconds" })`.
   */
  readonly schedule?: Schedule.Schedule<unknown>
  /** Attempts in all, the first included; default 3. */
  readonly maxAttempts?: number
  /** A `Retry-After` longer than this stops the retries (reason `"retry-after"`); default 60 s. */
  readonly maxRetryAfter?: Duration.Input
  /** The budget these retries draw from; without it, a `RetryBudget` in the caller's context, if any. */
  readonly budget?: RetryBudget.Budget
  /** The header that makes a request safe to repeat; default `Idempotency-Key`. */
  readonly idempotencyKeyHeader?: string
  /** The client's name, the `client` label of the retry metrics; default `"default"`. */
  readonly name?: string
  /**
   * The origins that get an `origin` label of their own in the retry metrics: the first ones this client
   * retries or gives up on; the others are counted under `origin: "other"`. An integer >= 0 or `Infinity`;
   * default 100. The metric registry keeps every series for the life of the process, so this bounds the series
   * (at most `maxOriginLabels + 1` per metric and reason) where the origins come from outside.
   */
  readonly maxOriginLabels?: number
}

/**
 * Retries what is safe and worth sending again (`HttpClassify`): a request never sent; an unknown outcome or a
 * 408, 429, 500, 502, 503, 504 answer when the method is idempotent or the request carries an Idempotency-Key;
 * and a keyed request's 409 that says the first attempt is still running (`IdempotencyMiddleware`'s problem type,
 * or any 409 with `Retry-After`). It waits `max(backoff, Retry-After)` (a spent quota's `t` when there is no
 * `Retry-After`), never past the deadline, within the budget. A retried answer's body is cut at 64 KiB and its
 * connection released before the wait. Everything inside runs again on each attempt. When retries run out:
 * `RetriesExhausted`, whose `last` is the `StatusError`, `ConnectFailed` or `NoResponse` of the last attempt
 * (`Retry.unwrap` fails with that error itself).
 *
 * Its retries and give-ups are counted in `Retry.retriesTotal` and `Retry.exhaustedTotal` labelled `client`
 * (`name`) and `origin` (the request's `URL.origin`: scheme, host, and port unless the default; `"unknown"` for
 * a relative URL; `"other"` past `maxOriginLabels`), not in their unlabelled series. Read one series with
 * `Metric.value(Metric.withAttributes(Retry.retriesTotal, { client, origin }))`. Under the same labels, each
 * attempt is timed in `http_client_request_duration_seconds` (OpenTelemetry's `http.client.request.duration`,
 * with `error.type`), each logical request in `effect_resilience_http_client_operation_duration_seconds`, and
 * each backoff in `effect_resilience_retry_backoff_seconds` (docs/observability.md).
 *
 * Traced: each logical request runs in a span `ResilientHttpClient.request` (the backoffs are its `Retry.backoff`
 * events, giving up its `Retry.exhausted` event) and each attempt in a child `ResilientHttpClient.attempt`, with
 * `http.request.resend_count` on resends, `error.type` and the deadline left; the transport's span is the
 * attempt's child (docs/observability.md, Traces).
 *
 * @since 1.0.0
 * @category combinators
 */
export const retry: (
  options?: RetryOptions
) => <E, R>(
  self: Client<E, R>
) => Client<E | ConnectFailed | NoResponse | RetriesExhausted<ConnectFailed | NoResponse | StatusError>, R> = retries
  .retry as any

/**
 * Runs each attempt through the breaker of its origin (scheme, host and port); an open breaker fails with
 * `CircuitOpen` without sending. A 408, 500, 502, 503 or 504 answer counts as a failure for the breaker (carrying
 * its `Retry-After` for `openForAtLeast`) and is still returned as the answer it is. Pass the same keyed breaker to
 * two clients to share it; keep it to read or control the breakers.
 *
 * @since 1.0.0
 * @category combinators
 */
export const circuitBreaker: {
  (breakers: Keyed<string>): <E, R>(self: Client<E, R>) => Client<E | CircuitOpen, R>
  <E, R>(self: Client<E, R>, breakers: Keyed<string>): Client<E | CircuitOpen, R>
} = guards.circuitBreaker

/**
 * Client-side adaptive throttling per origin: a call the throttle rejects fails with `LocallyRejected` and is
 * never sent. A 429 or 503 answer counts as not accepted (and is still returned). Every other failure inside
 * counts as not accepted too with the throttle's default `isAccepted`: put it where only sent requests run inside
 * it, or give the throttle an `isAccepted` of your own.
 *
 * @since 1.0.0
 * @category combinators
 */
export const adaptiveThrottle: {
  (throttle: AdaptiveThrottle.AdaptiveThrottle): <E, R>(self: Client<E, R>) => Client<E | LocallyRejected, R>
  <E, R>(self: Client<E, R>, throttle: AdaptiveThrottle.AdaptiveThrottle): Client<E | LocallyRejected, R>
} = guards.adaptiveThrottle

/**
 * Every attempt waits for `limiter.acquire(origin)`: client-side pacing, never past the deadline (`RateLimited`).
 *
 * @since 1.0.0
 * @category combinators
 */
export const rateLimiter: {
  (limiter: RateLimiter): <E, R>(self: Client<E, R>) => Client<E | RateLimited, R>
  <E, R>(self: Client<E, R>, limiter: RateLimiter): Client<E | RateLimited, R>
} = guards.rateLimiter

/**
 * @since 1.0.0
 * @category models
 */
export interface BackpressureOptions {
  /** The longest pause one answer can cause. Default 60 seconds. */
  readonly maxPause?: Duration.Input
  /** The share of refusals among recent answers from which a refusal pauses the origin, in (0, 1]. Default 0.5. */
  readonly threshold?: number
  /** Answers in quick succession needed before their share counts. Default 3. */
  readonly minAnswers?: number
  /** An answer's weight halves every `halfLife`. Default 10 seconds. */
  readonly halfLife?: Duration.Input
}

/**
 * Shares an origin's "hold off" between every caller of the client, in proportion to the evidence: a `RateLimit`
 * field with `r=0` (the quota is spent) pauses the origin until its `Retry-After`, else its `t`; a 429 or 503 with
 * `Retry-After` pauses it only while refusals are most of what the origin answers lately — one refusal from a
 * healthy origin holds nobody but its own retry. A call to a paused origin waits, or fails at once with
 * {@link OriginPaused} when its deadline ends first. The pauses belong to the client this returns, made when
 * it is applied.
 *
 * @since 1.0.0
 * @category combinators
 */
export const sharedBackpressure: (
  options?: BackpressureOptions
) => <E, R>(self: Client<E, R>) => Client<E | OriginPaused, R> = backpressure.sharedBackpressure as any

/**
 * @since 1.0.0
 * @category models
 */
export interface IdempotencyKeysOptions {
  /** Methods that get a key. Default `["POST", "PATCH"]`. */
  readonly methods?: ReadonlyArray<string>
  /** Default `Idempotency-Key`. */
  readonly header?: string
}

/**
 * One Idempotency-Key per request value: every execution of the same `HttpClientRequest` — retries, hedged copies,
 * an `Effect.retry` around `execute` — carries the same key; a new request value gets a new one; a key the caller
 * set wins. It runs before the rest of the client's preprocessing. (A `HttpClient.mapRequestInput` you add
 * outside it makes a new value per execution, hence a new key: add yours with `mapRequest`.)
 *
 * @since 1.0.0
 * @category combinators
 */
export const idempotencyKeys: (
  options?: IdempotencyKeysOptions
) => <E, R>(self: Client<E, R>) => Client<E, R> = keys.idempotencyKeys

/**
 * Each attempt sends `min(end of the attempt, deadline) - now` in whole milliseconds (relative, so clock skew does
 * not matter) in `Request-Timeout-Ms` (or `header`), which `DeadlineMiddleware` reads. It sends what is left when
 * the request goes: put it inside {@link attemptTimeout}.
 *
 * @since 1.0.0
 * @category combinators
 */
export const deadlineHeader: (
  options?: { readonly header?: string }
) => <E, R>(self: Client<E, R>) => Client<E, R> = headers.deadlineHeader

/**
 * Each attempt carries the fiber's `Criticality` in `Request-Criticality` (or `header`), which
 * `LoadShedMiddleware` reads.
 *
 * @since 1.0.0
 * @category combinators
 */
export const criticalityHeader: (
  options?: { readonly header?: string }
) => <E, R>(self: Client<E, R>) => Client<E, R> = headers.criticalityHeader
