/**
 * The orders service shared by `npm run serve` and `npm run demo`: how the server-side pieces compose.
 *
 * POST /orders         rate limit → idempotency → handler: 201 { id, ...body }
 *                      ?delayMs=n sleeps n ms, ?fail=500 answers 500, ?crash=1 dies (a defect)
 * GET  /orders         the orders this process created (the demo counts duplicates with it)
 * GET  /orders/count   { count }: how many orders this process's handler created
 * GET  /health         200
 * Everything runs under the caller's deadline (Request-Timeout-Ms), capped at 30 s.
 */
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Chaos, DeadlineMiddleware, IdempotencyMiddleware, RateLimiter, RateLimitMiddleware } from "../src/index.js"

export interface OrdersOptions {
  readonly rate: { readonly capacity: number; readonly refillPerSecond: number }
  readonly idempotency?: IdempotencyMiddleware.Options
  /** Faults between the network and the service (the demo's "unreliable network"). */
  readonly chaos?: Chaos.Faults
}

export interface Order {
  readonly id: string
  readonly [field: string]: unknown
}

export const makeOrdersApp = (options: OrdersOptions) =>
  Effect.gen(function*() {
    const created: Array<Order> = []
    const prefix = process.pid.toString(36)

    const createOrder = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const params = new URL(request.url, "http://localhost").searchParams
      const delay = Number(params.get("delayMs") ?? "0")
      if (delay > 0) yield* Effect.sleep(delay)
      if (params.get("crash") === "1") return yield* Effect.die(new Error("the handler crashed (?crash=1)"))
      if (params.get("fail") === "500") return HttpServerResponse.text("failed on purpose (?fail=500)", { status: 500 })
      const body = yield* request.json.pipe(Effect.orElseSucceed(() => null))
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return HttpServerResponse.unsafeJson({ error: "expected a JSON object" }, { status: 400 })
      }
      const order: Order = { ...body, id: `${prefix}-${created.length + 1}` }
      created.push(order) // the commit: from here on the order exists, whatever happens to the response
      return HttpServerResponse.unsafeJson(order, { status: 201, headers: { location: `/orders/${order.id}` } })
    })

    const limiter = yield* RateLimiter.tokenBucket({
      capacity: options.rate.capacity,
      refillPerSecond: options.rate.refillPerSecond
    })
    const orders = createOrder.pipe(
      IdempotencyMiddleware.make(options.idempotency),
      RateLimitMiddleware.make({ limiter, name: "orders" }), // outside idempotency: a 429 is never stored
      options.chaos === undefined ? (app) => app : Chaos.middleware(options.chaos)
    )
    const app = HttpRouter.empty.pipe(
      HttpRouter.post("/orders", orders),
      HttpRouter.get("/orders", Effect.sync(() => HttpServerResponse.unsafeJson(created))),
      HttpRouter.get("/orders/count", Effect.sync(() => HttpServerResponse.unsafeJson({ count: created.length }))),
      HttpRouter.get("/health", HttpServerResponse.text("ok")),
      DeadlineMiddleware.make({ maxTimeout: "30 seconds" })
    )
    return { app, created: () => created as ReadonlyArray<Order> }
  })
