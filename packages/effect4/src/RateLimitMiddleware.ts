/**
 * Server middleware that enforces a {@link RateLimiter} per client and says so in the response:
 *
 * - every response carries `RateLimit-Policy: "<name>";q=<quota>;w=<window s>` and
 *   `RateLimit: "<name>";r=<remaining>;t=<seconds>` (IETF draft-ietf-httpapi-ratelimit-headers-11,
 *   Structured Fields);
 * - over the limit: 429 problem+json (type `quota-exceeded`) with `Retry-After` in whole seconds (≥ 1),
 *   and the handler does not run;
 * - when the limiter's store cannot decide (`Decision.outage`, e.g. Redis unreachable): with the store failing
 *   closed, 503 problem+json (type {@link storeUnavailableType}) with `Retry-After` (the store's
 *   `retryAfterOnError`) and no RateLimit fields, and the handler does not run; failing open, the handler runs and
 *   the response has no RateLimit fields. Neither reports a quota that nobody used.
 *
 * Put it **before** (outside) the idempotency middleware (`app.pipe(idempotent, RateLimitMiddleware.make(...))`), so
 * a request over the limit is refused before it can claim a key. (The idempotency middleware never stores a
 * 429 anyway.)
 *
 * Each client has its own quota: by default per connection address ({@link ClientScope}), never per a header
 * the client chooses; the limiter's keys are digests of the scope.
 *
 * Every decision is counted in `effect_resilience_rate_limit_requests_total`, labelled `limiter` (the `name`) and
 * `decision` (`allowed`, `denied`, `outage_allowed`, `outage_denied`, `no_scope`): docs/observability.md.
 *
 * @since 1.0.0
 */
import type { Redacted } from "effect"
import type { HttpServerRequest } from "effect/http"
import type { ClientScope, Middleware } from "./ClientScope.js"
import * as internal from "./internal/http/rateLimitMiddleware.js"
import type { RateLimiter } from "./RateLimiter.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Options<R = never> {
  /** The limiter; its keys are digests of the clients' scopes. */
  readonly limiter: RateLimiter
  /** The policy name in the headers. Default `"default"`. */
  readonly name?: string
  /**
   * Who is limited. Default: `ClientScope.address()`, the connection's address; behind proxies
   * `ClientScope.address({ trustedProxies })`; with authentication a function that reads the principal. A
   * request with no identity is refused with a 500 rather than counted in a quota shared with others.
   */
  readonly scope?: ClientScope<R>
  /** A server secret for the digests of the scopes (HMAC-SHA-256 instead of SHA-256), as in the idempotency middleware. */
  readonly scopeSecret?: Redacted.Redacted<string> | string
  /** What a request costs. Default 1. */
  readonly cost?: (request: HttpServerRequest.HttpServerRequest) => number
}

/**
 * The problem type of a 429, as registered by the RateLimit headers draft.
 *
 * @since 1.0.0
 * @category constants
 */
export const quotaExceededType: typeof internal.quotaExceededType = internal.quotaExceededType

/**
 * The problem type of the 503 answered when the limiter's store is unavailable and fails closed.
 *
 * @since 1.0.0
 * @category constants
 */
export const storeUnavailableType: typeof internal.storeUnavailableType = internal.storeUnavailableType

/**
 * Builds the middleware. Throws `IllegalArgumentError` when called with invalid options (no limiter, a
 * name that is not a valid sf-string, a `cost` that is not a function).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { HttpRouter, HttpServerResponse } from "effect/http"
 * import { RateLimiter, RateLimiterStore, RateLimitMiddleware } from "effect-resilience"
 *
 * const HelloRoute = Layer.unwrap(Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.tokenBucket({ capacity: 20, refillPerSecond: 5 })
 *   const limited = RateLimitMiddleware.make({ limiter, name: "api" })
 *   return HttpRouter.add("GET", "/", Effect.succeed(HttpServerResponse.text("hi")).pipe(limited))
 * })).pipe(Layer.provide(RateLimiterStore.layerMemory))
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: <R = never>(options: Options<R>) => Middleware<R> = internal.make
