/**
 * `npm run serve -- --port 8080 [--store memory|sqlite|postgres|redis] [--db orders.db] [--rate 20:5] [--lease 60000]
 * [--api-keys key=customer,...] [--shed adaptive|gradient2] [--capacity 4:20] [--redis-url redis://…] [--clock-skew 500]
 * [--rate-on-error allow|deny] [--metrics]`
 *
 * Starts the orders service (./orders.ts) on 127.0.0.1 and prints `listening on http://127.0.0.1:<port>`: the
 * Effect 4 edition of examples/serve.ts, with the same options and output. `--metrics` (this edition only) also
 * answers `GET /metrics` with every metric in Prometheus's text format (`effect/observability`'s
 * `PrometheusMetrics`): docs/observability.md.
 */
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer } from "effect"
import * as AdaptiveLimiter from "effect-resilience/AdaptiveLimiter"
import { HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { createServer } from "node:http"
import { parseArgs } from "../../../examples/support/serveArgs.js"
import { makeOrdersApp } from "./orders.js"
import { reportShedLimit } from "./overload/limitReport.js"
import { storeLayers, withClockSkew } from "./support/serveOptions.js"

// `--metrics` is this edition's alone: taken out before the options both editions share are read
const argv = process.argv.slice(2)
const metrics = argv.includes("--metrics")
if (argv.includes("--help") || argv.includes("-h")) {
  // after the shared usage, which parseArgs prints before it exits
  process.once(
    "exit",
    () => console.log("--metrics: also serve GET /metrics (Prometheus text format; docs/observability.md)")
  )
}
const args = parseArgs(argv.filter((arg) => arg !== "--metrics"))

/** `GET /metrics`: the process' metrics as Prometheus scrapes them; every other request goes to `app`. */
const withMetrics = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) =>
      request.method === "GET" && request.url.split("?")[0] === "/metrics"
        ? Effect.map(
          PrometheusMetrics.format(),
          (text) => HttpServerResponse.text(text, { contentType: "text/plain; version=0.0.4; charset=utf-8" })
        )
        : app
  )

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
  yield* HttpServer.serveEffect(metrics ? withMetrics(app) : app)
  if (args.shed) yield* Effect.forkScoped(reportShedLimit) // `shed limit <n>` lines: `npm run overload -- --mix`
  const server = yield* HttpServer.HttpServer
  const port = server.address._tag === "UnixPathAddress" ? 0 : server.address.port
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
  withClockSkew(args.clockSkewMillis),
  Effect.provide(Layer.merge(
    NodeHttpServer.layer(makeServer, { port: args.port, host: "127.0.0.1" }),
    storeLayers(args)
  )),
  NodeRuntime.runMain
)
