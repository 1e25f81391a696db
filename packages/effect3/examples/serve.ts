/**
 * `npm run serve -- --port 8080 [--store memory|sqlite|postgres|redis] [--db orders.db] [--rate 20:5] [--lease 60000]
 * [--api-keys key=customer,...] [--shed adaptive|gradient2] [--capacity 4:20] [--redis-url redis://…] [--clock-skew 500]
 * [--rate-on-error allow|deny]`
 *
 * Starts the orders service (examples/orders.ts) on 127.0.0.1 and prints `listening on http://127.0.0.1:<port>`.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import * as AdaptiveLimiter from "effect-resilience/AdaptiveLimiter"
import { createServer } from "node:http"
import { parseArgs } from "../../../examples/support/serveArgs.js"
import { makeOrdersApp } from "./orders.js"
import { reportShedLimit } from "./overload/limitReport.js"
import { skewedClock, storeLayers } from "./support/serveOptions.js"

const args = parseArgs(process.argv.slice(2))

// `--shed gradient2`: to compare with the middleware's default
const shedAlgorithm = args.shedAlgorithm === "gradient2" ? { algorithm: AdaptiveLimiter.gradient2() } : {}

const main = Effect.gen(function*() {
  const { app } = yield* makeOrdersApp({
    rate: { capacity: args.rate.capacity, refillPerSecond: args.rate.refill },
    idempotency: { lease: args.leaseMillis },
    ...(args.apiKeys === undefined ? {} : { apiKeys: args.apiKeys }),
    // LoadShedMiddleware's own algorithm (Vegas, a short queue): see docs/overload.md, "Real processes"
    ...(args.shed ? { shed: { limiter: { minLimit: 1, maxLimit: 1000, ...shedAlgorithm } } } : {}),
    ...(args.capacity === undefined ? {} : { capacity: args.capacity })
  })
  yield* HttpServer.serveEffect(app)
  if (args.shed) yield* Effect.forkScoped(reportShedLimit) // `shed limit <n>` lines: `npm run overload -- --mix`
  const server = yield* HttpServer.HttpServer
  const port = server.address._tag === "TcpAddress" ? server.address.port : 0
  yield* Console.log(`listening on http://127.0.0.1:${port}`)
  return yield* Effect.never
})

/**
 * Node's own bounds on receiving a request, for every route, whatever the middlewares: headers within 10 s (its
 * default is 60 s), the whole request within 30 s (300 s), checked every second (30 s). They answer 408 and close
 * the connection. With `--shed adaptive`, `LoadShedMiddleware` bounds the body of `POST /orders` tighter (5 s).
 */
const makeServer = () =>
  createServer({ headersTimeout: 10_000, requestTimeout: 30_000, connectionsCheckingInterval: 1_000 })

main.pipe(
  Effect.scoped,
  args.clockSkewMillis === 0 ? (effect) => effect : Effect.withClock(skewedClock(args.clockSkewMillis)),
  Effect.provide(Layer.merge(
    NodeHttpServer.layer(makeServer, { port: args.port, host: "127.0.0.1" }),
    storeLayers(args)
  )),
  NodeRuntime.runMain
)
