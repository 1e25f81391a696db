/**
 * Server middleware that enforces a {@link RateLimiter} per client and says so in the response:
 *
 * - every response carries `RateLimit-Policy: "<name>";q=<quota>;w=<window s>` and
 *   `RateLimit: "<name>";r=<remaining>;t=<seconds>` (IETF draft-ietf-httpapi-ratelimit-headers-11,
 *   Structured Fields);
 * - over the limit: 429 problem+json (type `quota-exceeded`) with `Retry-After` in whole seconds (≥ 1),
 *   and the handler does not run.
 *
 * Put it **before** the idempotency middleware (`app.pipe(IdempotencyMiddleware.make(), RateLimitMiddleware.make(...))`):
 * a 429 is then never stored as the answer to an idempotency key.
 *
 * @since 0.1.0
 */
import type { HttpApp } from "@effect/platform"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Duration, Effect } from "effect"
import { defaultScope } from "../internal/clientScope.js"
import { problem } from "../internal/problem.js"
import * as validate from "../internal/validate.js"
import type { Decision, RateLimiter } from "../RateLimiter.js"
import * as RateLimitHeaders from "./RateLimitHeaders.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The limiter; its keys are the clients given by `scope`. */
  readonly limiter: RateLimiter
  /** The policy name in the headers. Default `"default"`. */
  readonly name?: string
  /** Who is limited. Default: the `X-Api-Key` header, else the remote address. */
  readonly scope?: (request: HttpServerRequest.HttpServerRequest) => string
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
export const make = (options: Options) => {
  const name = options.name ?? "default"
  if (!RateLimitHeaders.isValidName(name)) {
    validate.invalid(`RateLimitMiddleware name is not a valid sf-string: ${name}`)
  }
  const limiter = options.limiter
  const scopeOf = options.scope ?? defaultScope
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

  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.flatMap(
        limiter.tryAcquire(scopeOf(request), options.cost === undefined ? 1 : options.cost(request)),
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
      ))
}
