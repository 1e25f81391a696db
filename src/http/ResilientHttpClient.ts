/**
 * A resilient `HttpClient` built from one option object: per-attempt timeouts clipped to the caller's
 * deadline, retries of what is safe to retry (RFC 9110 method rules, connect vs unknown outcome, status
 * codes, `Retry-After`), a retry budget, a circuit breaker per origin, client-side pacing, one
 * Idempotency-Key per logical request (sent on every attempt), and the remaining deadline sent to the
 * server as a header.
 *
 * ```text
 * Retry.retry                       only Retryable; Retry-After; budget; stops before the deadline
 *   └─ limiter.acquire(origin)      client-side pacing (optional)
 *       └─ breaker.protect(origin)  fails fast with CircuitOpen (optional)
 *           └─ Deadline.timeout     attempt timeout clipped to what is left
 *               └─ execute          Idempotency-Key (same on every attempt), Request-Timeout-Ms
 * ```
 *
 * @since 0.1.0
 */
import type { HttpClient, HttpClientError } from "@effect/platform"
import type { Context, Duration, Effect, Layer, Schedule, Scope } from "effect"
import type * as AdaptiveThrottle from "../AdaptiveThrottle.js"
import type { LocallyRejected } from "../AdaptiveThrottle.js"
import type { CircuitOpen, KeyedOptions } from "../CircuitBreaker.js"
import type { DeadlineExceeded } from "../Deadline.js"
import * as internal from "../internal/http/resilientHttpClient.js"
import type { RateLimited, RateLimiter } from "../RateLimiter.js"
import type { RetriesExhausted } from "../Retry.js"
import type * as RetryBudget from "../RetryBudget.js"
import type { ConnectFailed, NoResponse, StatusError } from "./HttpErrors.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Each attempt's timeout (clipped to the deadline). Default 10 seconds. */
  readonly attemptTimeout?: Duration.DurationInput
  /**
   * Retries. Default: `Backoff.fullJitter({ base: "100 millis", cap: "5 seconds" })`, 3 attempts, Retry-After up
   * to 60 s. `false` turns retrying off (retryable statuses then fail with `StatusError`). `budget` gives this
   * client a `RetryBudget` of its own; without it, a `RetryBudget` in the caller's context is used.
   */
  readonly retry?: false | {
    readonly schedule?: Schedule.Schedule<Duration.Duration>
    readonly maxAttempts?: number
    readonly maxRetryAfter?: Duration.DurationInput
    readonly budget?: RetryBudget.Options
  }
  /**
   * A circuit breaker per origin (scheme, host and port), built with these options. Default: none. Unless
   * you pass `isFailure`, 429 answers do not count as failures (the server is throttling, not down). Unless you
   * pass `openForAtLeast`, a failure that opens the breaker with a `Retry-After` longer than `openFor` keeps it
   * open that long (at most a minute).
   */
  readonly breaker?: KeyedOptions
  /** A limiter keyed by origin that every attempt waits for (respecting the deadline). Default: none. */
  readonly rateLimiter?: RateLimiter
  /**
   * Idempotency keys. Default: requests with method POST or PATCH get a fresh UUID v4 in `Idempotency-Key`
   * unless they already carry one; `false` turns this off.
   */
  readonly idempotencyKeys?: false | {
    readonly methods?: ReadonlyArray<string>
    readonly header?: string
  }
  /**
   * The header carrying the attempt's time budget in milliseconds (`min(attempt timeout, remaining
   * deadline)`), or `false`. Default `Request-Timeout-Ms`, which `DeadlineMiddleware` reads.
   */
  readonly deadlineHeader?: false | string
  /**
   * The header carrying the fiber's `Criticality` (`critical`, `default` or `sheddable`) on every attempt, or
   * `false`. Default `Request-Criticality`, which `LoadShedMiddleware` reads.
   */
  readonly criticalityHeader?: false | string
  /**
   * Client-side adaptive throttling per origin (see `AdaptiveThrottle`): `true` for the defaults (`k = 2`, a
   * two-minute window), or its options. Answers other than 429 and 503 count as accepted; connection failures,
   * timeouts, 429 and 503 do not. A call the throttle rejects fails with `LocallyRejected` and is never sent.
   * Default: off.
   */
  readonly throttle?: boolean | AdaptiveThrottle.Options
  /**
   * Shared backpressure per origin. Default on: a 429 or 503 with `Retry-After`, or a `RateLimit` field with
   * `r=0` and a `t`, makes every later attempt to that origin — from any caller of this client — wait until
   * then (at most `retry.maxRetryAfter`, 60 s by default), or fail at once with `DeadlineExceeded` when its
   * deadline ends before the pause does. `false` leaves each request to its own retry.
   */
  readonly sharedBackpressure?: boolean
  /** Connect timeout of the Node transport (`effect-resilience/ResilientHttpClient/Node` only). Default 3 seconds. */
  readonly connectTimeout?: Duration.DurationInput
}

/**
 * Everything the resilient client can fail with. `StatusError` on its own only with `retry: false`; with
 * retries it is the `last` of `RetriesExhausted`.
 *
 * @since 0.1.0
 * @category models
 */
export type ResilientError =
  | HttpClientError.HttpClientError
  | ConnectFailed
  | NoResponse
  | StatusError
  | RetriesExhausted<ConnectFailed | NoResponse | StatusError>
  | CircuitOpen
  | RateLimited
  | DeadlineExceeded
  | LocallyRejected

/**
 * @since 0.1.0
 * @category models
 */
export interface ResilientHttpClient extends HttpClient.HttpClient.With<ResilientError> {}

/**
 * The service tag of a resilient client.
 *
 * @since 0.1.0
 * @category tags
 */
export const ResilientHttpClient: Context.Tag<ResilientHttpClient, ResilientHttpClient> = internal.ResilientHttpClient

/**
 * Wraps the `HttpClient` in the context. Throws `IllegalArgumentException` for invalid options when called
 * (not when the effect runs), like every constructor of the library; `layer` (and the Node transport's
 * `ResilientHttpClient/Node` layer) do the same.
 *
 * @example
 * ```ts
 * import { HttpClient, HttpClientRequest } from "@effect/platform"
 * import { Effect } from "effect"
 * import { CircuitBreaker, Deadline, ResilientHttpClient } from "effect-resilience"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* ResilientHttpClient.make({
 *     attemptTimeout: "2 seconds",
 *     retry: { maxAttempts: 4 },
 *     breaker: { trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }
 *   })
 *   const response = yield* client.execute(
 *     HttpClientRequest.post("http://127.0.0.1:8080/orders").pipe(HttpClientRequest.bodyUnsafeJson({ sku: "A" }))
 *   )
 *   return response.status
 * }).pipe(Deadline.within("5 seconds"), Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (
  options?: Options
) => Effect.Effect<ResilientHttpClient, never, HttpClient.HttpClient | Scope.Scope> = internal.make

/**
 * A layer providing {@link ResilientHttpClient} on top of the `HttpClient` you provide.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options?: Options) => Layer.Layer<ResilientHttpClient, never, HttpClient.HttpClient> =
  internal.layer

/**
 * Runs an effect with the resilient client's transport error classification, for use with your own client:
 * a transport `RequestError` becomes {@link ConnectFailed} or {@link NoResponse}; any other error is returned as it is.
 *
 * @since 0.1.0
 * @category classification
 */
export const classifyTransportError: (
  error: HttpClientError.HttpClientError
) => HttpClientError.HttpClientError | ConnectFailed | NoResponse = internal.classifyTransportError
