import { HttpClientRequest, HttpServerRequest } from "@effect/platform"
import type { HttpApp } from "@effect/platform"
import { Effect, Queue } from "effect"
import { makeOrdersApp } from "../../examples/orders.js"

/**
 * The example orders service (authentication by `X-Api-Key: k1`, rate limit, idempotency, deadline), each request
 * it receives told to `arrivals` with its Idempotency-Key, and `order(base)`: one POST of an order to it.
 */
export const tappedOrders = Effect.gen(function*() {
  const arrivals = yield* Queue.unbounded<string | undefined>()
  const tap = <E, R>(app: HttpApp.Default<E, R>) =>
    Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) => Effect.zipRight(Queue.offer(arrivals, request.headers["idempotency-key"]), app)
    )
  const service = yield* makeOrdersApp({
    rate: { capacity: 100, refillPerSecond: 100 },
    apiKeys: new Map([["k1", "alice"]]),
    network: tap
  })
  const order = (base: string) =>
    HttpClientRequest.post(`${base}/orders`).pipe(
      HttpClientRequest.setHeader("x-api-key", "k1"),
      HttpClientRequest.bodyUnsafeJson({ sku: "BOOK-1" })
    )
  return { app: service.app, arrivals, created: service.created, order }
})
