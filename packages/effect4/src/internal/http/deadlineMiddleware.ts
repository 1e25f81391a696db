import * as DeadlineHeader from "@effect-resilience/core/deadlineHeader"
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import { Effect } from "effect"
import { HttpServerRequest, type HttpServerResponse } from "effect/http"
import type { Options } from "../../DeadlineMiddleware.js"
import { DeadlineExceeded, withinOf } from "../deadline.js"
import * as validate from "../validate.js"
import { problem } from "./problem.js"

export const defaultHeader = HttpHeaders.requestTimeout

export const make = (options: Options = {}) => {
  const headerName = options.header ?? defaultHeader
  if (typeof headerName !== "string" || headerName === "") {
    validate.invalid(`DeadlineMiddleware header must be a header name, got ${String(headerName)}`)
  }
  const header = headerName.toLowerCase()
  if (options.onMalformed !== undefined && options.onMalformed !== "ignore" && options.onMalformed !== "reject") {
    validate.invalid(`DeadlineMiddleware onMalformed must be "ignore" or "reject", got ${String(options.onMalformed)}`)
  }
  const max = validate.millis("DeadlineMiddleware maxTimeout", options.maxTimeout ?? "60 seconds")
  const fallback = options.defaultTimeout === undefined
    ? undefined
    : Math.min(max, validate.millis("DeadlineMiddleware defaultTimeout", options.defaultTimeout))
  const reject = options.onMalformed === "reject"

  const answerWith = <E, R>(
    raw: string | undefined,
    parsed: number | undefined,
    app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> => {
    if (raw !== undefined && parsed === undefined && reject) {
      return Effect.succeed(problem({
        status: 400,
        type: "deadline-header-invalid",
        title: `Invalid ${options.header ?? "Request-Timeout-Ms"} header`,
        detail: "expected the remaining time in milliseconds as a non-negative integer"
      }))
    }
    const budget = DeadlineHeader.serverBudget(parsed, max, fallback)
    if (budget === undefined) return app
    return app.pipe(
      withinOf(budget),
      Effect.catchIf(
        (e): e is DeadlineExceeded => e instanceof DeadlineExceeded,
        () =>
          Effect.succeed(problem({
            status: 504,
            type: "deadline-exceeded",
            title: "Deadline exceeded",
            detail: "the request's deadline passed before it could be answered"
          }))
      )
    )
  }

  return <E, R>(
    app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const raw = request.headers[header]
      const parsed = raw === undefined ? undefined : DeadlineHeader.parse(raw)
      const answer = answerWith(raw, parsed, app)
      // the request's span: what the header asked (and `deadline.remaining_ms`, from `within`, what was given)
      if (raw === undefined) return answer
      return Effect.andThen(
        Effect.annotateCurrentSpan(
          parsed === undefined ? "deadline.header_invalid" : "deadline.header_ms",
          parsed ?? true
        ),
        answer
      )
    })
}
