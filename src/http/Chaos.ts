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
import type { HttpApp } from "@effect/platform"
import {
  HttpClient,
  HttpClientError,
  type HttpClientRequest,
  HttpClientResponse,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Duration, Effect, Random } from "effect"
import * as validate from "../internal/validate.js"

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

interface Compiled {
  readonly latency: readonly [number, Duration.Duration] | undefined
  readonly connectFailure: number
  readonly errors: ReadonlyArray<readonly [number, number, string | undefined]>
  readonly lost: number
}

const probability = (name: string, p: number | undefined): number => {
  if (p === undefined) return 0
  if (!(p >= 0 && p <= 1)) validate.invalid(`Chaos ${name} probability must be in [0, 1], got ${p}`)
  return p
}

const compile = (faults: Faults): Compiled => {
  const errors = faults.errorResponse === undefined
    ? []
    : Array.isArray(faults.errorResponse)
    ? faults.errorResponse as ReadonlyArray<ErrorResponse>
    : [faults.errorResponse as ErrorResponse]
  return {
    latency: faults.latency === undefined ? undefined : [
      probability("latency", faults.latency.probability),
      Duration.millis(validate.millis("Chaos latency delay", faults.latency.delay))
    ],
    connectFailure: probability("connectFailure", faults.connectFailure?.probability),
    errors: errors.map((e) => {
      if (!Number.isInteger(e.status) || e.status < 100 || e.status > 599) {
        validate.invalid(`Chaos errorResponse status must be an HTTP status, got ${e.status}`)
      }
      const retryAfter = e.retryAfter === undefined
        ? undefined
        : String(Math.ceil(validate.millis("Chaos retryAfter", e.retryAfter) / 1000))
      return [probability("errorResponse", e.probability), e.status, retryAfter] as const
    }),
    lost: probability("lostResponse", faults.lostResponse?.probability)
  }
}

/** One draw per fault kind, in a fixed order, so a seed always gives the same pattern. */
const roll = (p: number) => p === 0 ? Effect.succeed(false) : Effect.map(Random.next, (r) => r < p)

const delayFor = (c: Compiled) =>
  c.latency === undefined
    ? Effect.void
    : Effect.flatMap(roll(c.latency[0]), (hit) => hit ? Effect.sleep(c.latency![1]) : Effect.void)

const pickError = (c: Compiled): Effect.Effect<readonly [number, string | undefined] | undefined> =>
  Effect.gen(function*() {
    let chosen: readonly [number, string | undefined] | undefined
    for (const [p, status, retryAfter] of c.errors) {
      if ((yield* roll(p)) && chosen === undefined) chosen = [status, retryAfter]
    }
    return chosen
  })

const errorBody = (status: number) =>
  JSON.stringify({ type: "urn:effect-resilience:problem:chaos", title: "Injected fault", status })

const socketError = (code: string, message: string) => Object.assign(new Error(message), { code })

/**
 * Wraps a client so its requests meet the faults.
 *
 * @example
 * ```ts
 * import { HttpClient } from "@effect/platform"
 * import { Effect } from "effect"
 * import { Chaos } from "effect-resilience"
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
export const client = (faults: Faults) => {
  const c = compile(faults)
  return <E, R>(
    self: HttpClient.HttpClient.With<E, R>
  ): HttpClient.HttpClient.With<E | HttpClientError.RequestError, R> =>
    HttpClient.transform(self, (execute, request: HttpClientRequest.HttpClientRequest) =>
      Effect.gen(function*() {
        yield* delayFor(c)
        if (yield* roll(c.connectFailure)) {
          return yield* new HttpClientError.RequestError({
            request,
            reason: "Transport",
            cause: socketError("ECONNREFUSED", "chaos: connection refused")
          })
        }
        const error = yield* pickError(c)
        if (error !== undefined) {
          const headers: Record<string, string> = { "content-type": "application/problem+json" }
          if (error[1] !== undefined) headers["retry-after"] = error[1]
          return HttpClientResponse.fromWeb(request, new Response(errorBody(error[0]), { status: error[0], headers }))
        }
        const lose = yield* roll(c.lost)
        const response = yield* execute
        if (!lose) return response
        // the server did the work; its answer never reaches the caller
        yield* Effect.ignore(response.arrayBuffer)
        return yield* new HttpClientError.RequestError({
          request,
          reason: "Transport",
          cause: socketError("ECONNRESET", "chaos: response lost after the server handled the request")
        })
      }))
}

/**
 * A server middleware injecting the same faults (`connectFailure` does not apply on the server).
 * `lostResponse` needs the Node HTTP server (it destroys the request's socket after the handler ran).
 *
 * @since 0.1.0
 * @category constructors
 */
export const middleware = (faults: Faults) => {
  const c = compile(faults)
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.gen(function*() {
      yield* delayFor(c)
      const error = yield* pickError(c)
      if (error !== undefined) {
        return HttpServerResponse.text(errorBody(error[0]), {
          status: error[0],
          contentType: "application/problem+json",
          ...(error[1] === undefined ? {} : { headers: { "retry-after": error[1] } })
        })
      }
      const lose = yield* roll(c.lost)
      const response = yield* app
      if (lose) {
        const request = yield* HttpServerRequest.HttpServerRequest
        const socket = (request.source as { socket?: { destroy?: () => void } } | undefined)?.socket
        socket?.destroy?.()
      }
      return response
    })
}
