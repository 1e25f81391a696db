/**
 * One replica of the service the failover fault (./redisFailover.ts) runs against a Redis Cluster: every
 * Redis feature of the library in one request path, as an operator would wire them.
 *
 *   node --import tsx examples/faults/failoverApp.ts --nodes <port,port,…> --breaker <name> --stream <name>
 *     [--lease 3000] [--rate-on-error allow|deny] [--consume] [--id <name>] [--wait-replicas <ms>]
 *
 * `POST /orders` (an `X-Api-Key` of `--api-keys`-style customers `k0`…`k7` is the caller):
 * the Redis rate limiter (`RateLimiterStore/Redis`, one token bucket per customer, generous) → the
 * idempotency middleware (`IdempotencyStore/Redis`) → the handler: a call of a dependency through the fleet
 * circuit breaker (`CircuitBreaker/Redis`), then `send` of an "order created" message (id = the order's
 * `logicalId`) to a `RedisStreamQueue`, then the commit (the order exists). A breaker refusal or a failed
 * send answers 503 before the commit, which the middleware does not store: the client's retry runs again.
 * With `--consume`, this replica also consumes the stream (`Consumer.run`, the in-memory idempotent
 * consumer: a redelivered message is skipped).
 *
 * `GET /orders`: the logicalIds this replica committed. `GET /stats`: what the fault counts — breaker
 * refusals and fallbacks, failed sends, and per message id its deliveries and its effects.
 * All stores share the Cluster's startup nodes; each owns its client. `--wait-replicas <ms>` turns on
 * `waitReplicas: { replicas: 1, timeout }` for the idempotency store and the queue's sends.
 */
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Metric } from "effect"
import {
  CircuitBreaker,
  ClientScope,
  Consumer,
  IdempotencyMiddleware,
  RateLimiter,
  RateLimitMiddleware
} from "effect-resilience"
import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import type * as QueueSource from "effect-resilience/QueueSource"
import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { Cluster } from "ioredis"
import { createServer } from "node:http"
import { breakerName, nodes, onError, values, waitReplicas } from "../../../../examples/faults/failoverArgs.js"

/** The customers: `X-Api-Key: k<i>` is customer `c<i>`; anything else has no identity (the middlewares: 500). */
const customerOf: ClientScope.ClientScope = (request) => {
  const key = request.headers["x-api-key"] ?? ""
  return /^k[0-7]$/.test(key)
    ? Effect.succeed(`c${key.slice(1)}`)
    : Effect.fail(new ClientScope.NoClientIdentity({ reason: "no known X-Api-Key" }))
}

interface Created {
  readonly logicalId: string
}

const counts = { breakerRefused: 0, sendFailed: 0 }
const committed: Array<string> = []
const deliveries = new Map<string, number>()
const effects = new Map<string, number>()
const bump = (map: Map<string, number>, id: string) => map.set(id, (map.get(id) ?? 0) + 1)

const unavailable = (detail: string) =>
  HttpServerResponse.text(JSON.stringify({ title: "Service Unavailable", status: 503, detail }), {
    status: 503,
    contentType: "application/problem+json",
    headers: { "retry-after": "1" }
  })

const main = Effect.gen(function*() {
  const redis = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Cluster(nodes)
      client.on("error", () => {})
      return client
    }),
    (client) => Effect.sync(() => client.disconnect())
  )
  const source = yield* RedisStreamQueue.make<Created>({
    redis,
    stream: values.stream!,
    visibilityTimeout: "3 seconds",
    consumer: values.id,
    ...(waitReplicas === undefined ? {} : { waitReplicas })
  })
  const breaker = yield* CircuitBreakerRedis.make({
    name: breakerName,
    redis: { cluster: nodes },
    trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { duration: "10 seconds" } }),
    openFor: "5 seconds"
  })
  const fallbacks = CircuitBreakerRedis.fleetFallbacksTotal.pipe(Metric.tagged("breaker", breakerName))
  if (values.consume) {
    const ship = yield* Consumer.idempotentMemory((message: QueueSource.Message<Created>) =>
      Effect.sync(() => bump(effects, message.id))
    )
    yield* Consumer.run({
      source,
      handler: (message) => Effect.zipRight(Effect.sync(() => bump(deliveries, message.id)), ship(message)),
      concurrency: 4,
      maxReceiveCount: 100, // a failover must never dead-letter a good message
      pollInterval: "50 millis"
    })
  }

  // the dependency is healthy throughout: every refusal of the breaker would be the failover's doing
  const dependency = Effect.void
  const createOrder = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = yield* request.json.pipe(Effect.orElseSucceed(() => null))
    const logicalId = typeof body === "object" && body !== null && "logicalId" in body ? String(body.logicalId) : ""
    if (logicalId === "") return HttpServerResponse.text("expected { logicalId }", { status: 400 })
    const called = yield* Effect.either(breaker.protect(dependency))
    if (called._tag === "Left") {
      counts.breakerRefused++
      return unavailable("the dependency's breaker is open")
    }
    const sent = yield* Effect.either(source.send([{ id: logicalId, body: { logicalId } }]))
    if (sent._tag === "Left") {
      counts.sendFailed++
      return unavailable(`the queue refused the message: ${sent.left.message}`)
    }
    committed.push(logicalId) // the commit: from here on the order exists
    return HttpServerResponse.unsafeJson({ id: `${values.id}-${committed.length}`, logicalId }, { status: 201 })
  })
  const limiter = yield* RateLimiter.tokenBucket({ capacity: 100_000, refillPerSecond: 100_000 })
  const idempotent = yield* IdempotencyMiddleware.make({ lease: Number(values.lease), scope: customerOf })
  const orders = createOrder.pipe(idempotent, RateLimitMiddleware.make({ limiter, name: "orders", scope: customerOf }))
  const stats = Effect.map(Metric.value(fallbacks), (fallback) =>
    HttpServerResponse.unsafeJson({
      ...counts,
      breakerFallbacks: fallback.count,
      deliveries: Object.fromEntries(deliveries),
      effects: Object.fromEntries(effects)
    }))
  const app = HttpRouter.empty.pipe(
    HttpRouter.post("/orders", orders),
    HttpRouter.get("/orders", Effect.sync(() => HttpServerResponse.unsafeJson(committed))),
    HttpRouter.get("/stats", stats)
  )
  yield* HttpServer.serveEffect(app)
  const server = yield* HttpServer.HttpServer
  const port = server.address._tag === "TcpAddress" ? server.address.port : 0
  yield* Console.log(`listening on http://127.0.0.1:${port}`)
  return yield* Effect.never
})

main.pipe(
  Effect.scoped,
  Effect.provide(Layer.mergeAll(
    NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }),
    IdempotencyStoreRedis.layer({ cluster: nodes, ...(waitReplicas === undefined ? {} : { waitReplicas }) }),
    RateLimiterStoreRedis.layer({ cluster: nodes, onError })
  )),
  NodeRuntime.runMain
)
