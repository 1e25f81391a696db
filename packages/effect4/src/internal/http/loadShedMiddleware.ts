import * as shed from "@effect-resilience/core/criticality"
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import { bodyUnreadable, declaredTooLarge } from "@effect-resilience/core/idempotencyResponse"
import type { Cause, Duration } from "effect"
import { Effect } from "effect"
import { Metric } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import type { Options } from "../../LoadShedMiddleware.js"
import * as adaptiveLimiter from "../adaptiveLimiter.js"
import { monotonicMillis } from "../clock.js"
import { CurrentCriticality, headerName as defaultHeader } from "../criticality.js"
import { loadShedSeries, zeroShedSeries } from "../telemetry.js"
import { timeoutWith } from "../timeout.js"
import * as validate from "../validate.js"
import { isNotASample, runAdmitted } from "./admission.js"
import { problem } from "./problem.js"
import { hasBody, readBody, withBody } from "./requestBody.js"

export const overloadedType = "urn:effect-resilience:problem:overloaded"

type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/**
 * See `Options.limiter`: the windowed Vegas with a short queue (its probes drain before they measure, so they keep it
 * short).
 */
const defaultAlgorithm = adaptiveLimiter.windowedVegas({ alpha: 2, beta: 4 })

// the connection is closed after these: the rest of the body may still be on its way
const tooLarge = (maxBodyBytes: number) =>
  problem({
    status: 413,
    type: "body-too-large",
    title: "Request body too large",
    detail: `this endpoint takes request bodies of at most ${maxBodyBytes} bytes`,
    headers: { connection: "close" }
  })

const timedOut = (millis: number) =>
  problem({
    status: 408,
    type: "request-timeout",
    title: "Request Timeout",
    detail: `the request body did not arrive within ${millis} ms`,
    headers: { connection: "close" }
  })

const unreadable = problem(bodyUnreadable)

/** A refused request's answer: a 503 with Retry-After, its decision on the span and in the series. */
const refusal =
  (series: ReturnType<typeof loadShedSeries>, retryAfterSeconds: number, level: string) =>
  (refused: { readonly reason: string }) =>
    Effect.as(
      Effect.andThen(
        Effect.annotateCurrentSpan({
          "load_shed.criticality": level,
          "load_shed.decision": refused.reason
        }),
        Metric.update(series(level, refused.reason), 1)
      ),
      problem({
        status: 503,
        type: overloadedType,
        title: "Service Unavailable",
        detail: refused.reason === "shed"
          ? `the server keeps its remaining capacity for requests more critical than "${level}"; ` +
            `retry in ${retryAfterSeconds} s`
          : `the server is at capacity; retry in ${retryAfterSeconds} s`,
        headers: { [HttpHeaders.retryAfter]: String(retryAfterSeconds) }
      })
    )

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
  const maxBodyBytes = validate.positiveInt("LoadShedMiddleware maxBodyBytes", options.maxBodyBytes ?? 1024 * 1024)
  const bodyTimeoutMillis = validate.millis("LoadShedMiddleware bodyTimeout", options.bodyTimeout ?? "5 seconds")
  if (bodyTimeoutMillis <= 0) validate.invalid("LoadShedMiddleware bodyTimeout must be longer than zero")
  const partitionBy = options.partitionBy
  if (partitionBy !== undefined && typeof partitionBy !== "function") {
    validate.invalid("LoadShedMiddleware partitionBy must be a function of the request")
  }
  const given = options.limiter
  const isOverload = given?.isOverload ?? adaptiveLimiter.isTimeout
  const limiterOptions = {
    shares: shed.defaultShares,
    algorithm: defaultAlgorithm,
    // fair shares are taken by waiters: a partitioned middleware queues (see `Options.partitionBy`)
    ...(partitionBy === undefined ? {} : { maxQueue: 100, queueTimeout: "1 second" as Duration.Input }),
    ...given,
    // a slow start (see `Options.limiter`); the limiter checks the bounds themselves
    initialLimit: given?.initialLimit ?? Math.max(given?.minLimit ?? 1, Math.min(4, given?.maxLimit ?? 1_000)),
    name: given?.name ?? "load-shed",
    // an answer that is no sample ends its slot with a failure of ours: never an overload, whatever yours says
    isOverload: (cause: Cause.Cause<unknown>) => !isNotASample(cause) && isOverload(cause)
  }
  const built = adaptiveLimiter.make(limiterOptions)
  // `effect_resilience_load_shed_requests_total`: criticality (3 values) × decision (admitted or a refusal reason)
  const shedSeries = loadShedSeries(limiterOptions.name)

  /** The request's criticality: yours, or its header (a claim of `critical` only from a trusted caller). */
  const levelOf = options.criticality ?? ((request: HttpServerRequest.HttpServerRequest) => {
    const claimed = shed.parse(request.headers[header]) ?? "default"
    return Effect.succeed(claimed === "critical" && !trustCritical ? "default" : claimed)
  })

  /**
   * The request with its body read, or the answer when it cannot be: the body is read before admission, so a
   * client still sending holds no slot, and within `bodyTimeout`, so it cannot take a connection for long.
   */
  const received = (request: HttpServerRequest.HttpServerRequest) => {
    if (!hasBody(request)) return Effect.succeed(request)
    if (declaredTooLarge(request.headers["content-length"], maxBodyBytes)) return Effect.succeed(tooLarge(maxBodyBytes))
    return Effect.clockWith((clock) =>
      timeoutWith(
        // interruptible even where the server runs the app uninterruptibly (effect/http does): the timeout must
        // be able to stop the read
        Effect.interruptible(readBody(request, maxBodyBytes)),
        monotonicMillis(clock) + bodyTimeoutMillis,
        clock,
        () => "timed-out" as const
      ).pipe(
        Effect.catch((timedOut) => Effect.succeed(timedOut)),
        Effect.map((body) =>
          body === "timed-out"
            ? timedOut(bodyTimeoutMillis)
            : body === "too-large"
            ? tooLarge(maxBodyBytes)
            : body === "unreadable"
            ? unreadable
            : body === "consumed"
            ? request // read before us: nothing left to receive, and no other bytes to hand on in its place
            : withBody(request, body)
        )
      )
    )
  }

  return Effect.map(
    Effect.tap(built, () => zeroShedSeries(shedSeries)), // every level's admitted and shed series at 0
    (limiter) => <E, R1>(app: App<E, R1>): App<E, R1 | R | HttpServerRequest.HttpServerRequest> => {
      // (the time it waited for its slot is the limiter's `adaptive_limiter.queued_ms`, on the same span)
      const admittedAs = (level: string) =>
        Effect.andThen(
          Effect.annotateCurrentSpan({ "load_shed.criticality": level, "load_shed.decision": "admitted" }),
          Metric.update(shedSeries(level, "admitted"), 1)
        )
      return Effect.flatMap(
        HttpServerRequest.HttpServerRequest,
        (request) =>
          Effect.flatMap(received(request), (ready) => {
            if (HttpServerResponse.isHttpServerResponse(ready)) return Effect.succeed(ready)
            const served = ready === request
              ? app
              : Effect.provideService(app, HttpServerRequest.HttpServerRequest, ready)
            // the app's own failures pass through untouched: only this limiter's refusal becomes a 503
            return Effect.flatMap(levelOf(ready), (level) => {
              const admitted = Effect.provideService(
                runAdmitted(
                  limiter,
                  Effect.andThen(admittedAs(level), served),
                  refusal(shedSeries, retryAfterSeconds, level)
                ),
                CurrentCriticality,
                level
              )
              return partitionBy === undefined
                ? admitted
                : Effect.provideService(admitted, adaptiveLimiter.CurrentPartition, partitionBy(ready))
            })
          })
      )
    }
  )
}
