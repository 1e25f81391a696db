/**
 * Server-side load shedding: every request is admitted through an {@link AdaptiveLimiter} before its handler
 * runs, and refused with `503 Service Unavailable`, `Retry-After` and a problem+json body when the server is at
 * the limit the limiter has found — in a few microseconds, without queueing work whose caller will have given up
 * by the time it runs. Capacity is kept for more critical work: with the default shares a `sheddable` request is
 * refused once 70 % of the limit is in use, a `default` one at 90 %, and a `critical` one only at 100 %.
 *
 * A slot is held by work the server does, not by a client's upload or wait:
 *
 * - the request body is read before admission, within `bodyTimeout` (5 s; else `408`) and `maxBodyBytes`
 *   (1 MiB; else `413`); a request without a body is admitted at once;
 * - a handler that goes on after its client stopped waiting (the `IdempotencyMiddleware` runs every
 *   admitted handler to its end) keeps the slot until it ends.
 *
 * The limiter learns only from work: a response below 400 is a sample, timed from admission to the end of the
 * work; a 4xx or 5xx answer, an answer the idempotency middleware gives without running the handler (a replay,
 * a 409), a failure of the app and an interruption are not — except the failures the limiter's `isOverload`
 * counts (by default a timeout), which tell it to back off.
 *
 * The request's criticality comes from the `Request-Criticality` header that `ResilientHttpClient` sends
 * (missing or malformed: `default`). A header is a claim: `critical` is believed only with `trustCritical` (a
 * server behind an authenticating gateway) or when your own `criticality` function says so. The handler then
 * runs under that criticality, so the calls it makes carry it on.
 *
 * Every admission and refusal is counted in `effect_resilience_load_shed_requests_total`, labelled `limiter`,
 * `criticality` and `decision` (`admitted` or the refusal's reason): docs/observability.md.
 *
 * @since 1.0.0
 */
import type { Duration, Effect, Scope } from "effect"
import type { HttpServerRequest } from "effect/http"
import type * as AdaptiveLimiter from "./AdaptiveLimiter.js"
import type { Middleware } from "./ClientScope.js"
import type { Criticality } from "./Criticality.js"
import * as internal from "./internal/http/loadShedMiddleware.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Options<R = never> {
  /**
   * The admission limiter's options. Default: `AdaptiveLimiter.windowedVegas({ alpha: 2, beta: 4 })` from 4
   * concurrent requests (or `minLimit`), no queue, and the shares `{ default: 0.9, sheddable: 0.7 }`; its metrics are
   * labelled `limiter` = `"load-shed"` unless you name it. Vegas, because it aims at a short queue beyond the no-load latency, so the
   * server's latency stays near its unloaded value; that latency is a window's trimmed mean, so answers that do
   * little work (a 400, a 404, a replay) mixed in with the rest, or sent on purpose, cannot pin the limit down; and it
   * is re-measured by draining first, so a re-measure does not let the queue grow. A low start, because Vegas grows
   * fast while nothing queues, and a start above the server's capacity fills a queue at once. Gradient2 follows a
   * latency that rises and stays up (its baseline is an average of recent samples), so under a steady overload it
   * lets the queue grow.
   *
   * Its `isOverload` is asked about the app's failures (an interruption included); the answers that are no
   * samples (see above) never reach it.
   */
  readonly limiter?: AdaptiveLimiter.Options
  /** The header carrying the caller's criticality. Default `Request-Criticality`. */
  readonly header?: string
  /** Believe a `critical` header (else it counts as `default`). Default `false`. */
  readonly trustCritical?: boolean
  /** Decide the criticality yourself, e.g. from the authenticated principal; replaces the header. */
  readonly criticality?: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<Criticality, never, R>
  /**
   * Shares the capacity fairly between clients, e.g. the authenticated customer or the client's address
   * (`(request) => request.headers["x-customer"] ?? "anonymous"` behind a gateway that sets it). While the
   * requests of several partitions wait for a slot, the slots that free up go to them in turn, round robin,
   * first come first served within each: a client offering ten times the others' load gets an equal share
   * while they wait, and a slot nobody else waits for goes to whoever comes. Waiting needs a queue: with
   * `partitionBy`, the limiter's `maxQueue` defaults to 100 and its `queueTimeout` to 1 second (set them in
   * `limiter`), and a full queue drops the newest waiter of the partition that has the most for a newcomer of
   * another. Criticality comes first: a request over its criticality's share is refused before it waits.
   */
  readonly partitionBy?: (request: HttpServerRequest.HttpServerRequest) => string
  /** The `Retry-After` of a refusal, in whole seconds (at least 1). Default 1 second. */
  readonly retryAfter?: Duration.Input
  /**
   * The largest request body, in bytes; a larger one, declared or sent, gets `413` problem+json. Default 1 MiB.
   * Bodies are read whole before admission (so a slow upload holds no slot) and handed to the app as read.
   */
  readonly maxBodyBytes?: number
  /**
   * How long a client may take to send its request body, from the moment its headers arrived; a slower one gets
   * `408 Request Timeout` problem+json and its connection is closed. Default 5 seconds.
   */
  readonly bodyTimeout?: Duration.Input
}

/**
 * The `type` of a refusal's problem+json body.
 *
 * @since 1.0.0
 * @category constants
 */
export const overloadedType: string = internal.overloadedType

/**
 * Builds the middleware and its limiter, which lives as long as the scope: build it once, where the server is
 * built, and wrap the app with it (a limiter per request would learn nothing). Throws `IllegalArgumentError`
 * for invalid options.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { HttpRouter, HttpServerResponse } from "effect/http"
 * import { LoadShedMiddleware } from "effect-resilience"
 *
 * // admission through an adaptive limit; sheddable requests are refused first
 * const SearchRoute = Layer.unwrap(Effect.gen(function*() {
 *   const shed = yield* LoadShedMiddleware.make({ limiter: { maxLimit: 200 } })
 *   return HttpRouter.add("GET", "/search", shed(Effect.succeed(HttpServerResponse.text("results"))))
 * }))
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: <R = never>(options?: Options<R>) => Effect.Effect<Middleware<R>, never, Scope.Scope> = internal.make
