/**
 * The policies that guard an origin per request: the circuit breaker, the adaptive throttle and the client-side
 * rate limiter, each keyed by origin. A breaker and a throttle judge outcomes, and an answer is an outcome they
 * must see as a failure when it says the origin is down (the breaker: 408, 500, 502, 503, 504) or refusing (the
 * throttle: 429, 503). Inside their `protect` such a response fails with a `Retryable` `StatusError` carrying its
 * `Retry-After` (what a breaker's `openForAtLeast` reads), and is handed on as the response it is outside — so
 * a ready-made breaker or throttle, built with its own options, judges HTTP answers right.
 */
import * as Backpressure from "@effect-resilience/core/backpressure"
import * as HttpClassify from "@effect-resilience/core/httpClassify"
import type { HttpClient, HttpClientResponse } from "@effect/platform"
import { Clock, Effect } from "effect"
import type { AdaptiveThrottle } from "../../../AdaptiveThrottle.js"
import type { Keyed } from "../../../CircuitBreaker.js"
import type { RateLimiter } from "../../../RateLimiter.js"
import { type Retryable, retryable } from "../../failure.js"
import * as validate from "../../validate.js"
import { StatusError } from "../httpErrors.js"
import { fieldsOf } from "./answer.js"
import { around, dualClient, originOf } from "./client.js"

/** Statuses a breaker counts as the origin failing: the retried ones, except 429 (throttling is no outage). */
export const isOutage = (status: number): boolean =>
  HttpClassify.isRetryableStatus(status) && HttpClassify.statusIsOutage(status)

/**
 * Runs `guard` around `effect`, with a response whose status `fails` failing inside it (the guard sees the
 * failure) and handed on outside (the caller sees the response).
 */
const judged = <E, R, E1, R1>(
  effect: Effect.Effect<HttpClientResponse.HttpClientResponse, E, R>,
  fails: (status: number) => boolean,
  guard: (
    effect: Effect.Effect<HttpClientResponse.HttpClientResponse, E | Retryable<StatusError>, R>
  ) => Effect.Effect<HttpClientResponse.HttpClientResponse, E1, R1>
) =>
  Effect.suspend(() => {
    let marker: Retryable<StatusError> | undefined
    const inside = Effect.flatMap(effect, (response) => {
      if (!fails(response.status)) return Effect.succeed(response)
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const wait = HttpClassify.honoursRetryAfter(response.status)
          ? fieldsOf(response, now).retryAfterMillis
          : undefined
        const error = new StatusError({ status: response.status, response })
        marker = wait === undefined ? retryable(error) : retryable(error, wait)
        return Effect.fail(marker)
      })
    })
    return Effect.catchIf(
      guard(inside),
      (e): e is E1 & Retryable<StatusError> => marker !== undefined && e === marker,
      (e) => Effect.succeed(e.cause.response)
    )
  })

const need = (value: unknown, method: string, what: string) => {
  if (typeof value !== "object" || value === null || typeof (value as Record<string, unknown>)[method] !== "function") {
    validate.invalid(`ResilientHttpClient ${what}`)
  }
}

export const circuitBreaker = dualClient((breakers: Keyed<string>) => {
  need(breakers, "protect", "circuitBreaker needs a CircuitBreaker.Keyed<string> (CircuitBreaker.keyed)")
  return <E, R>(self: HttpClient.HttpClient.With<E, R>) =>
    around(
      self,
      (request, execute) =>
        judged(execute(request), isOutage, (effect) => breakers.protect(effect, originOf(request.url)))
    )
})

export const adaptiveThrottle = dualClient((throttle: AdaptiveThrottle) => {
  need(throttle, "protect", "adaptiveThrottle needs an AdaptiveThrottle (AdaptiveThrottle.make)")
  return <E, R>(self: HttpClient.HttpClient.With<E, R>) =>
    around(
      self,
      (request, execute) =>
        judged(execute(request), Backpressure.isRefusal, (effect) => throttle.protect(effect, originOf(request.url)))
    )
})

export const rateLimiter = dualClient((limiter: RateLimiter) => {
  need(limiter, "acquire", "rateLimiter needs a RateLimiter")
  return <E, R>(self: HttpClient.HttpClient.With<E, R>) =>
    around(self, (request, execute) => Effect.zipRight(limiter.acquire(originOf(request.url)), execute(request)))
})
