import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import * as RateLimitHeaders from "@effect-resilience/core/rateLimitHeaders"
import { Duration, Effect, Metric } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Decision } from "../../RateLimiter.js"
import type { Options } from "../../RateLimitMiddleware.js"
import { initOnce, type RateLimitDecision, rateLimitSeries } from "../telemetry.js"
import * as validate from "../validate.js"
import { refuse, resolver } from "./clientScope.js"
import { problem } from "./problem.js"

export const quotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"
export const storeUnavailableType = "urn:effect-resilience:problem:rate-limit-store-unavailable"

type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/**
 * A decision the store made because it could not count (`Decision.outage`): a denial is a 503 that says so, an
 * admission passes; neither carries RateLimit fields, which would report a quota nobody used.
 */
const duringOutage = <E, R>(decision: Decision, app: App<E, R>): App<E, R> => {
  if (decision.allowed) return app
  const retryAfter = RateLimitHeaders.retryAfterSeconds(Duration.toMillis(decision.retryAfter))
  return Effect.succeed(problem({
    status: 503,
    type: storeUnavailableType,
    title: "Service Unavailable",
    detail: `the rate limiter cannot reach its store, so the request was not processed; retry in ${retryAfter} s`,
    headers: { [HttpHeaders.retryAfter]: String(retryAfter) }
  }))
}

export const make = <R = never>(options: Options<R>) => {
  const name = options?.name ?? "default"
  if (!RateLimitHeaders.isValidName(name)) {
    validate.invalid(`RateLimitMiddleware name is not a valid sf-string: ${name}`)
  }
  const limiter = options?.limiter
  if (limiter === undefined || limiter === null || typeof limiter.tryAcquire !== "function") {
    validate.invalid("RateLimitMiddleware needs a limiter (e.g. RateLimiter.tokenBucket)")
  }
  if (options.cost !== undefined && typeof options.cost !== "function") {
    validate.invalid("RateLimitMiddleware cost must be a function of the request")
  }
  const scopeOf = resolver(options.scope, options.scopeSecret)
  const counted = rateLimitSeries(name) // `effect_resilience_rate_limit_requests_total`, labelled limiter = name
  const initialized = initOnce(Object.values(counted)) // every decision's series at 0 from the first request
  const windowMillis = Duration.toMillis(limiter.window)
  // the policy never changes: written once
  const policy = RateLimitHeaders.policyFor(name, limiter.limit, windowMillis)
  const headersOf = (decision: Decision) => ({
    "ratelimit-policy": policy,
    ratelimit: RateLimitHeaders.stateFor(
      name,
      decision.remaining,
      RateLimitHeaders.nextQuotaMillis({
        algorithm: limiter.algorithm,
        limit: limiter.limit,
        windowMillis,
        allowed: decision.allowed,
        remaining: decision.remaining,
        retryAfterMillis: Duration.toMillis(decision.retryAfter),
        resetAfterMillis: Duration.toMillis(decision.resetAfter)
      })
    )
  })

  /** The request's span: the middleware's name, its decision and the quota left (the metric's labels, and more). */
  const annotate = (decision: RateLimitDecision, of: Decision | undefined) =>
    Effect.annotateCurrentSpan(
      of === undefined
        ? { "rate_limit.name": name, "rate_limit.decision": decision }
        : {
          "rate_limit.name": name,
          "rate_limit.decision": decision,
          "rate_limit.remaining": of.remaining,
          "rate_limit.retry_after_ms": Duration.toMillis(of.retryAfter)
        }
    )

  const decide = <E, R1>(scope: string, request: HttpServerRequest.HttpServerRequest, app: App<E, R1>) =>
    Effect.flatMap(
      limiter.tryAcquire(scope, options.cost === undefined ? 1 : options.cost(request)),
      (decision): App<E, R1> => {
        if (decision.outage === true) {
          const series = decision.allowed ? counted.outage_allowed : counted.outage_denied
          return annotate(decision.allowed ? "outage_allowed" : "outage_denied", decision).pipe(
            Effect.andThen(Metric.update(series, 1)),
            Effect.andThen(duringOutage(decision, app))
          )
        }
        const headers = headersOf(decision)
        if (!decision.allowed) {
          const retryAfter = RateLimitHeaders.retryAfterSeconds(Duration.toMillis(decision.retryAfter))
          return Effect.as(
            Effect.andThen(annotate("denied", decision), Metric.update(counted.denied, 1)),
            problem({
              status: 429,
              type: quotaExceededType,
              title: "Too Many Requests",
              detail: `quota of ${limiter.limit} per ${
                RateLimitHeaders.secondsOf(windowMillis)
              } s exceeded; retry in ${retryAfter} s`,
              headers: { ...headers, [HttpHeaders.retryAfter]: String(retryAfter) }
            })
          )
        }
        return annotate("allowed", decision).pipe(
          Effect.andThen(Metric.update(counted.allowed, 1)),
          Effect.andThen(Effect.map(app, HttpServerResponse.setHeaders(headers)))
        )
      }
    )

  return <E, R1>(app: App<E, R1>): App<E, R1 | R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.flatMap(
        Effect.andThen(initialized(), Effect.result(scopeOf(request))),
        (scope) =>
          scope._tag === "Failure"
            ? annotate("no_scope", undefined).pipe(
              Effect.andThen(Metric.update(counted.no_scope, 1)),
              Effect.andThen(refuse("rate limit", scope.failure))
            )
            : decide(scope.success, request, app)
      ))
}
