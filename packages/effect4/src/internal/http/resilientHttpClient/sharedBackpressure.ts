/**
 * Shared backpressure per origin (the decisions are in `core/backpressure.ts`): every answer of an origin feeds
 * its evidence; a request to a paused origin waits until the pause ends, or fails at once with `OriginPaused`
 * when its deadline comes first. The wait runs before any policy inside (limiter, throttle, breaker, attempt
 * timeout), so it is neither paced, counted nor timed as part of the call.
 */
import * as Backpressure from "@effect-resilience/core/backpressure"
import { Duration, Effect } from "effect"
import type { HttpClient } from "effect/http"
import { monotonicMillis } from "../../clock.js"
import { withDeadline } from "../../deadline.js"
import { event } from "../../trace.js"
import * as validate from "../../validate.js"
import { fieldsOf } from "./answer.js"
import { around, originOf } from "./client.js"
import { OriginPaused } from "./errors.js"

export interface BackpressureOptions {
  readonly maxPause?: Duration.Input
  readonly threshold?: number
  readonly minAnswers?: number
  readonly halfLife?: Duration.Input
}

/** Origins remembered at most; idle ones are dropped first. */
const MAX_ORIGINS = 10_000

export const resolveBackpressure = (options: BackpressureOptions | undefined): Backpressure.Config => {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    validate.invalid("ResilientHttpClient sharedBackpressure must be a boolean or an object")
  }
  const d = Backpressure.defaults
  const threshold = options?.threshold ?? d.threshold
  if (!(typeof threshold === "number" && threshold > 0 && threshold <= 1)) {
    validate.invalid(`ResilientHttpClient sharedBackpressure.threshold must be in (0, 1], got ${threshold}`)
  }
  const halfLifeMillis = options?.halfLife === undefined
    ? d.halfLifeMillis
    : validate.millis("ResilientHttpClient sharedBackpressure.halfLife", options.halfLife, { finite: true })
  if (halfLifeMillis <= 0) validate.invalid("ResilientHttpClient sharedBackpressure.halfLife must be longer than zero")
  return {
    threshold,
    minAnswers: validate.positiveInt(
      "ResilientHttpClient sharedBackpressure.minAnswers",
      options?.minAnswers ?? d.minAnswers
    ),
    halfLifeMillis,
    maxPauseMillis: options?.maxPause === undefined
      ? d.maxPauseMillis
      : validate.millis("ResilientHttpClient sharedBackpressure.maxPause", options.maxPause)
  }
}

export const sharedBackpressure = (options?: BackpressureOptions) => {
  const config = resolveBackpressure(options)
  return <E, R>(self: HttpClient.HttpClient.With<E, R>) => {
    // this client's evidence per origin, made with the client
    const origins = new Map<string, Backpressure.Evidence>()

    const note = (origin: string, answer: Backpressure.Answer, now: number) => {
      if (origins.size >= MAX_ORIGINS && !origins.has(origin)) {
        for (const [key, evidence] of origins) if (Backpressure.isIdle(evidence, now, config)) origins.delete(key)
        if (origins.size >= MAX_ORIGINS) origins.delete(origins.keys().next().value!)
      }
      origins.set(origin, Backpressure.observe(origins.get(origin) ?? Backpressure.none, answer, now, config))
    }

    const holdFor = (origin: string): Effect.Effect<void, OriginPaused> =>
      withDeadline((deadline, now) => {
        const hold = Backpressure.hold(origins.get(origin)?.pausedUntil, now, deadline)
        switch (hold._tag) {
          case "Go":
            return Effect.void
          case "Wait":
            // the pause may have grown meanwhile
            return event("ResilientHttpClient.origin_paused", () => ({ origin, "pause.wait_ms": hold.millis })).pipe(
              Effect.andThen(Effect.sleep(Duration.millis(hold.millis))),
              Effect.andThen(holdFor(origin))
            )
          case "GiveUp":
            return Effect.andThen(
              event("ResilientHttpClient.origin_paused", () => ({
                origin,
                "pause.remaining_ms": hold.until - now,
                "pause.refused": true
              })),
              Effect.fail(new OriginPaused({ origin, retryAfter: Duration.millis(hold.until - now) }))
            )
        }
      })

    return around(self, (request, execute) => {
      const origin = originOf(request.url)
      return Effect.andThen(
        holdFor(origin),
        Effect.tap(execute(request), (response) =>
          Effect.clockWith((clock) =>
            Effect.sync(() => {
              // an HTTP-date is read on the wall clock; the pause it asks for is a duration, kept on the
              // monotonic reading as the deadlines it is held against are
              const { limits, retryAfterMillis } = fieldsOf(response, clock.currentTimeMillisUnsafe())
              note(origin, { status: response.status, retryAfterMillis, limits }, monotonicMillis(clock))
            })
          ))
      )
    })
  }
}
