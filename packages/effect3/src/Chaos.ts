/**
 * Fault injection for HTTP, for tests and demos: a client transform and a server middleware that add
 * latency, fail connections, answer 5xx/429 with `Retry-After`, and — the failure behind duplicate orders —
 * **lose the response after the server committed the work**.
 *
 * Every decision is one draw of Effect's `Random` per fault kind and every delay is a `Clock` sleep, so a
 * seeded `Random` (`Effect.withRandom(Random.make(seed))`) gives the same fault pattern each run for requests
 * made one after another, and `TestClock` controls the latency. Concurrent requests share the draws in
 * whatever order they arrive: for a pattern that does not depend on timing, give each request its own
 * `Random` seeded from what identifies it (as `npm run demo` does).
 *
 * @since 0.1.0
 */
import type { HttpApp, HttpClient, HttpClientError, HttpServerRequest } from "@effect/platform"
import type { Duration } from "effect"
import * as internal from "./internal/http/chaos.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface ErrorResponse {
  readonly probability: number
  /** e.g. 503, 500, 429 */
  readonly status: number
  /** Sent as `Retry-After` (whole seconds, rounded up). */
  readonly retryAfter?: Duration.DurationInput
}

/**
 * Each fault happens with its `probability` (0 to 1), decided independently per request.
 *
 * @since 0.1.0
 * @category models
 */
export interface Faults {
  /** Extra time before the request is handled. */
  readonly latency?: { readonly probability: number; readonly delay: Duration.DurationInput }
  /** Client only: the connection fails before anything is sent (a connect error the client classifies as "not sent"). */
  readonly connectFailure?: { readonly probability: number }
  /** An error response instead of the real one; the handler does not run. Several may be listed. */
  readonly errorResponse?: ErrorResponse | ReadonlyArray<ErrorResponse>
  /**
   * The request is handled (the work is committed), then the response is lost: the client sees the
   * connection reset, an unknown outcome. On the server this destroys the Node socket.
   */
  readonly lostResponse?: { readonly probability: number }
}

/**
 * Wraps a client so its requests meet the faults. Throws `IllegalArgumentException` when called with a
 * probability outside [0, 1], a status outside 100–599 or a negative duration.
 *
 * @example
 * ```ts
 * import { HttpClient } from "@effect/platform"
 * import { Effect } from "effect"
 * import * as Chaos from "effect-resilience/Chaos"
 *
 * const flaky = Effect.map(HttpClient.HttpClient, Chaos.client({
 *   errorResponse: { probability: 0.1, status: 503, retryAfter: "1 second" },
 *   lostResponse: { probability: 0.05 }
 * }))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const client: (
  faults: Faults
) => <E, R>(self: HttpClient.HttpClient.With<E, R>) => HttpClient.HttpClient.With<E | HttpClientError.RequestError, R> =
  internal.client

/**
 * A server middleware injecting the same faults (`connectFailure` does not apply on the server).
 * `lostResponse` needs the Node HTTP server (it destroys the request's socket after the handler ran). Throws
 * `IllegalArgumentException` for invalid faults, like {@link client}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware: (
  faults: Faults
) => <E, R>(app: HttpApp.Default<E, R>) => HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =
  internal.middleware
