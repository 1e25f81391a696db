/**
 * The example orders service — how the server-side pieces compose, and the black-box test target.
 *
 *   npm run serve -- --port 8080 [--store memory|sqlite|postgres|redis] [--db orders.db] [--rate 20:5]
 *
 * POST /orders         rate limit → idempotency (Idempotency-Key required) → 201 { id, ...body }
 *                      ?delayMs=n sleeps n ms, ?fail=500 answers 500, ?crash=1 dies (a defect)
 * GET  /orders/count   { count }: orders created by THIS process's handler
 * GET  /health         200
 * Every route runs under the caller's deadline (Request-Timeout-Ms), capped at 30 s.
 */
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import { createServer } from "node:http"
import { DeadlineMiddleware, IdempotencyMiddleware, RateLimiter, RateLimitMiddleware } from "../src/index.js"
import { parseArgs, storeLayers } from "./support/serveOptions.js"

const args = parseArgs(process.argv.slice(2))

let created = 0
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
  const id = `${prefix}-${++created}`
  return HttpServerResponse.unsafeJson({ id, ...body }, { status: 201, headers: { location: `/orders/${id}` } })
})

const app = Effect.gen(function*() {
  const limiter = yield* RateLimiter.tokenBucket({ capacity: args.rate.capacity, refillPerSecond: args.rate.refill })
  const orders = createOrder.pipe(
    IdempotencyMiddleware.make(),
    RateLimitMiddleware.make({ limiter, name: "orders" }) // outermost: a 429 is never stored under a key
  )
  return HttpRouter.empty.pipe(
    HttpRouter.post("/orders", orders),
    HttpRouter.get("/orders/count", Effect.sync(() => HttpServerResponse.unsafeJson({ count: created }))),
    HttpRouter.get("/health", HttpServerResponse.text("ok")),
    DeadlineMiddleware.make({ maxTimeout: "30 seconds" })
  )
})

const main = Effect.gen(function*() {
  yield* HttpServer.serveEffect(yield* app)
  const address = yield* HttpServer.HttpServer
  const port = address.address._tag === "TcpAddress" ? address.address.port : 0
  yield* Console.log(`listening on http://127.0.0.1:${port}`)
  return yield* Effect.never
})

const stores = storeLayers(args)

main.pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(
    NodeHttpServer.layer(createServer, { port: args.port, host: "127.0.0.1" }),
    stores
  )),
  NodeRuntime.runMain
)
