/**
 * Server middleware that enforces a {@link RateLimiter} per client and says so in the response:
 *
 * - every response carries `RateLimit-Policy: "<name>";q=<quota>;w=<window s>` and
 *   `RateLimit: "<name>";r=<remaining>;t=<seconds>` (IETF draft-ietf-httpapi-ratelimit-headers-11,
 *   Structured Fields);
 * - over the limit: 429 problem+json (type `quota-exceeded`) with `Retry-After` in whole seconds (≥ 1),
 *   and the handler does not run.
 *
 * Put it **before** (outside) the idempotency middleware (`app.pipe(idempotent, RateLimitMiddleware.make(...))`), so
 * a request over the limit is refused before it can claim a key. (The idempotency middleware never stores a
 * 429 anyway.)
 *
 * Each client has its own quota: by default per connection address ({@link ClientScope}), never per a header
 * the client chooses; the limiter's keys are digests of the scope.
 *
 * @since 0.1.0
 */
import type { HttpApp } from "@effect/platform"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Duration, Effect, type Redacted } from "effect"
import { refuse, resolver } from "../internal/clientScope.js"
import { problem } from "../internal/problem.js"
import * as validate from "../internal/validate.js"
import type { Decision, RateLimiter } from "../RateLimiter.js"
import type { ClientScope } from "./ClientScope.js"
import * as RateLimitHeaders from "./RateLimitHeaders.js"

/**
 * @since 0.1.0
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
 * @since 0.1.0
 * @category constants
 */
export const quotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

const seconds = (d: Duration.Duration) => Math.ceil(Duration.toMillis(d) / 1000)

/**
 * @example
 * ```ts
 * import { HttpRouter, HttpServerResponse } from "@effect/platform"
 * import { Effect } from "effect"
 * import { RateLimiter, RateLimitMiddleware } from "effect-resilience"
 *
 * const app = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.tokenBucket({ capacity: 20, refillPerSecond: 5 })
 *   const router = HttpRouter.empty.pipe(HttpRouter.get("/", HttpServerResponse.text("hi")))
 *   return router.pipe(RateLimitMiddleware.make({ limiter, name: "api" }))
 * })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <R = never>(options: Options<R>) => {
  const name = options.name ?? "default"
  if (!RateLimitHeaders.isValidName(name)) {
    validate.invalid(`RateLimitMiddleware name is not a valid sf-string: ${name}`)
  }
  const limiter = options.limiter
  const scopeOf = resolver(options.scope, options.scopeSecret)
  const policy = RateLimitHeaders.formatPolicy({
    name,
    quota: limiter.limit,
    window: Math.max(1, seconds(limiter.window))
  })
  const headersOf = (decision: Decision) => ({
    "ratelimit-policy": policy,
    ratelimit: RateLimitHeaders.formatRateLimit({
      name,
      remaining: decision.remaining,
      reset: seconds(decision.resetAfter)
    })
  })

  const decide = <E, R1>(scope: string, request: HttpServerRequest.HttpServerRequest, app: HttpApp.Default<E, R1>) =>
    Effect.flatMap(
      limiter.tryAcquire(scope, options.cost === undefined ? 1 : options.cost(request)),
      (decision) => {
        const headers = headersOf(decision)
        if (!decision.allowed) {
          const retryAfter = Math.max(1, seconds(decision.retryAfter))
          return Effect.succeed(problem({
            status: 429,
            type: quotaExceededType,
            title: "Too Many Requests",
            detail: `quota of ${limiter.limit} per ${seconds(limiter.window)} s exceeded; retry in ${retryAfter} s`,
            headers: { ...headers, "retry-after": String(retryAfter) }
          }))
        }
        return Effect.map(app, HttpServerResponse.setHeaders(headers))
      }
    )

  return <E, R1>(app: HttpApp.Default<E, R1>): HttpApp.Default<E, R1 | R> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.flatMap(
        Effect.either(scopeOf(request)),
        (scope) => {
          return scope._tag === "Left" ? refuse("rate limit", scope.left) : decide(scope.right, request, app)
        }
      ))
}
