import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import type { HttpApp } from "@effect/platform"
import {
  HttpClient,
  HttpClientError,
  type HttpClientRequest,
  HttpClientResponse,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Duration, Effect, Random } from "effect"
import type { ErrorResponse, Faults } from "../../Chaos.js"
import * as validate from "../validate.js"

interface Compiled {
  readonly latency: readonly [number, Duration.Duration] | undefined
  readonly connectFailure: number
  readonly errors: ReadonlyArray<readonly [number, number, string | undefined]>
  readonly lost: number
}

const probability = (name: string, p: number | undefined): number => {
  if (p === undefined) return 0
  if (!(p >= 0 && p <= 1)) validate.invalid(`Chaos ${name} probability must be in [0, 1], got ${p}`)
  return p
}

/** Checks the faults when the transform or middleware is built, as every constructor does. */
const compile = (faults: Faults): Compiled => {
  const errors = faults.errorResponse === undefined
    ? []
    : Array.isArray(faults.errorResponse)
    ? faults.errorResponse as ReadonlyArray<ErrorResponse>
    : [faults.errorResponse as ErrorResponse]
  return {
    latency: faults.latency === undefined ? undefined : [
      probability("latency", faults.latency.probability),
      Duration.millis(validate.millis("Chaos latency delay", faults.latency.delay))
    ],
    connectFailure: probability("connectFailure", faults.connectFailure?.probability),
    errors: errors.map((e) => {
      if (!Number.isInteger(e.status) || e.status < 100 || e.status > 599) {
        validate.invalid(`Chaos errorResponse status must be an HTTP status, got ${e.status}`)
      }
      const retryAfter = e.retryAfter === undefined
        ? undefined
        : String(Math.ceil(validate.millis("Chaos retryAfter", e.retryAfter) / 1000))
      return [probability("errorResponse", e.probability), e.status, retryAfter] as const
    }),
    lost: probability("lostResponse", faults.lostResponse?.probability)
  }
}

/** One draw per fault kind, in a fixed order, so a seed always gives the same pattern. */
const roll = (p: number) => p === 0 ? Effect.succeed(false) : Effect.map(Random.next, (r) => r < p)

const delayFor = (c: Compiled) =>
  c.latency === undefined
    ? Effect.void
    : Effect.flatMap(roll(c.latency[0]), (hit) => hit ? Effect.sleep(c.latency![1]) : Effect.void)

const pickError = (c: Compiled): Effect.Effect<readonly [number, string | undefined] | undefined> =>
  Effect.gen(function*() {
    let chosen: readonly [number, string | undefined] | undefined
    // every kind draws even after one hit: the draws per request stay the same whatever the outcome
    for (const [p, status, retryAfter] of c.errors) {
      if ((yield* roll(p)) && chosen === undefined) chosen = [status, retryAfter]
    }
    return chosen
  })

const errorBody = (status: number) =>
  JSON.stringify({ type: "urn:effect-resilience:problem:chaos", title: "Injected fault", status })

const socketError = (code: string, message: string) => Object.assign(new Error(message), { code })

export const client = (faults: Faults) => {
  const c = compile(faults)
  return <E, R>(
    self: HttpClient.HttpClient.With<E, R>
  ): HttpClient.HttpClient.With<E | HttpClientError.RequestError, R> =>
    HttpClient.transform(self, (execute, request: HttpClientRequest.HttpClientRequest) =>
      Effect.gen(function*() {
        yield* delayFor(c)
        if (yield* roll(c.connectFailure)) {
          return yield* new HttpClientError.RequestError({
            request,
            reason: "Transport",
            cause: socketError("ECONNREFUSED", "chaos: connection refused")
          })
        }
        const error = yield* pickError(c)
        if (error !== undefined) {
          const headers: Record<string, string> = { "content-type": "application/problem+json" }
          if (error[1] !== undefined) headers[HttpHeaders.retryAfter] = error[1]
          return HttpClientResponse.fromWeb(request, new Response(errorBody(error[0]), { status: error[0], headers }))
        }
        const lose = yield* roll(c.lost)
        const response = yield* execute
        if (!lose) return response
        // the server did the work; its answer never reaches the caller
        yield* Effect.ignore(response.arrayBuffer)
        return yield* new HttpClientError.RequestError({
          request,
          reason: "Transport",
          cause: socketError("ECONNRESET", "chaos: response lost after the server handled the request")
        })
      }))
}

export const middleware = (faults: Faults) => {
  const c = compile(faults)
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.gen(function*() {
      yield* delayFor(c)
      const error = yield* pickError(c)
      if (error !== undefined) {
        return HttpServerResponse.text(errorBody(error[0]), {
          status: error[0],
          contentType: "application/problem+json",
          ...(error[1] === undefined ? {} : { headers: { [HttpHeaders.retryAfter]: error[1] } })
        })
      }
      const lose = yield* roll(c.lost)
      const response = yield* app
      if (lose) {
        const request = yield* HttpServerRequest.HttpServerRequest
        const socket = (request.source as { socket?: { destroy?: () => void } } | undefined)?.socket
        socket?.destroy?.()
      }
      return response
    })
}
