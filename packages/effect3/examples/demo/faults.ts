/**
 * The demo's unreliable network. Which fault a request meets is a pure function of the seed and of the
 * request (pattern.ts, shared with the Effect 4 edition's demo), so one seed tells the same story on every run.
 *
 * The client side names each request in three headers (`x-demo-client`, `x-demo-order`, `x-demo-attempt`);
 * the server side looks the fault up and applies it with the library's `Chaos` middleware.
 */
import { type HttpApp, HttpClient, HttpClientRequest, HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import * as Chaos from "effect-resilience/Chaos"
import { attemptOf, faultFor, header, type Injected, slowMillis } from "../../../../examples/demo/pattern.js"

export {
  type Attempt,
  attemptOf,
  type Fault,
  faultFor,
  type Injected,
  rates,
  readTimeoutMillis,
  slowMillis
} from "../../../../examples/demo/pattern.js"

/** Names a logical order's request: the client transform below adds the attempt number. */
export const forOrder = (client: number, order: string) => (request: HttpClientRequest.HttpClientRequest) =>
  HttpClientRequest.setHeaders(request, { [header.client]: String(client), [header.order]: order })

/**
 * Numbers the attempts of each logical order as they go on the wire (below any retry logic). The attempts
 * of one order are sequential — one client places it — so the numbering does not depend on timing.
 */
export const numberAttempts = (client: HttpClient.HttpClient): HttpClient.HttpClient => {
  const attempts = new Map<string, number>()
  return HttpClient.mapRequest(client, (request) => {
    const order = request.headers[header.order]
    if (order === undefined) return request
    const attempt = (attempts.get(order) ?? 0) + 1
    attempts.set(order, attempt)
    return HttpClientRequest.setHeader(request, header.attempt, String(attempt))
  })
}

const lose = Chaos.middleware({ lostResponse: { probability: 1 } })
const unavailable = Chaos.middleware({ errorResponse: { probability: 1, status: 503, retryAfter: "1 second" } })
const slow = Chaos.middleware({ latency: { probability: 1, delay: slowMillis } })

/** The server side: a middleware applying each named request's fault, and what it injected. */
export const network = (seed: number) => {
  const injected: Injected = { lostAfterCommit: 0, lost: 0, unavailable: 0, slow: 0 }
  const middleware = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const attempt = attemptOf(request.headers)
      const fault = attempt === undefined ? "none" : faultFor(seed, attempt)
      switch (fault) {
        case "none":
          return app
        case "lost-response":
          return Effect.tap(lose(app), (response) =>
            Effect.sync(() => {
              injected.lost++
              if (response.status === 201 && response.headers["idempotent-replayed"] !== "true") {
                injected.lostAfterCommit++
              }
            }))
        case "unavailable":
          return Effect.zipLeft(unavailable(app), Effect.sync(() => injected.unavailable++))
        case "slow":
          return Effect.zipRight(Effect.sync(() => injected.slow++), slow(app))
      }
    })
  return { middleware, injected: (): Readonly<Injected> => ({ ...injected }) }
}
