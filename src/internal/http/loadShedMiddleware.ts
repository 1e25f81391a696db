import type { HttpApp } from "@effect/platform"
import { HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import * as shed from "../../core/loadShed.js"
import type { Options } from "../../http/LoadShedMiddleware.js"
import * as adaptiveLimiter from "../adaptiveLimiter.js"
import { currentCriticality, headerName as defaultHeader } from "../criticality.js"
import * as validate from "../validate.js"
import { problem } from "./problem.js"

export const overloadedType = "urn:effect-resilience:problem:overloaded"

/** See `Options.limiter`: Vegas with a short queue (its probes drain before they measure, so they keep it short). */
const defaultAlgorithm = adaptiveLimiter.vegas({ alpha: 2, beta: 4 })

export const make = <R = never>(options: Options<R> = {}) => {
  const header = (options.header ?? defaultHeader).toLowerCase()
  if (header === "") validate.invalid("LoadShedMiddleware header must be a header name")
  const retryAfterSeconds = Math.max(
    1,
    Math.ceil(validate.millis("LoadShedMiddleware retryAfter", options.retryAfter ?? "1 second") / 1000)
  )
  const trustCritical = options.trustCritical === true
  if (options.criticality !== undefined && typeof options.criticality !== "function") {
    validate.invalid("LoadShedMiddleware criticality must be a function of the request")
  }
  const given = options.limiter
  const limiterOptions = {
    shares: shed.defaultShares,
    algorithm: defaultAlgorithm,
    ...given,
    // a slow start (see `Options.limiter`); the limiter checks the bounds themselves
    initialLimit: given?.initialLimit ?? Math.max(given?.minLimit ?? 1, Math.min(4, given?.maxLimit ?? 1_000)),
    name: given?.name ?? "load-shed"
  }
  const built = adaptiveLimiter.make(limiterOptions)

  /** The request's criticality: yours, or its header (a claim of `critical` only from a trusted caller). */
  const levelOf = options.criticality ?? ((request: HttpServerRequest.HttpServerRequest) => {
    const claimed = shed.parse(request.headers[header]) ?? "default"
    return Effect.succeed(claimed === "critical" && !trustCritical ? "default" : claimed)
  })

  return Effect.map(
    built,
    (limiter) => <E, R1>(app: HttpApp.Default<E, R1>): HttpApp.Default<E, R1 | R> =>
      Effect.flatMap(
        HttpServerRequest.HttpServerRequest,
        (request) =>
          Effect.flatMap(levelOf(request), (level) =>
            // the app's own failures pass through untouched: only this limiter's refusal becomes a 503
            limiter.protect(Effect.either(app)).pipe(
              Effect.matchEffect({
                onSuccess: (result) => result,
                onFailure: (refused) =>
                  Effect.succeed(problem({
                    status: 503,
                    type: overloadedType,
                    title: "Service Unavailable",
                    detail: refused.reason === "shed"
                      ? `the server keeps its remaining capacity for requests more critical than "${level}"; ` +
                        `retry in ${retryAfterSeconds} s`
                      : `the server is at capacity; retry in ${retryAfterSeconds} s`,
                    headers: { "retry-after": String(retryAfterSeconds) }
                  }))
              }),
              Effect.locally(currentCriticality, level)
            ))
      ) as HttpApp.Default<E, R1 | R>
  )
}
