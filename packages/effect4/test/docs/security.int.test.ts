import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import {
  type ClientScope,
  IdempotencyMiddleware,
  IdempotencyStore,
  RateLimiter,
  RateLimiterStore,
  RateLimitHeaders,
  RateLimitMiddleware
} from "effect-resilience"
import { HttpClient, HttpClientRequest, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

// ---- the server ----

/** The authenticated caller, provided by `authenticate` to everything inside it. */
class Customer extends Context.Service<Customer, { readonly id: string }>()("Customer") {}

// stands in for your real authentication (sessions, JWTs, a user database)
const tokens = new Map([["alice-token", "alice"], ["bob-token", "bob"]])

/** An app: what answers the current request. */
type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

/** Authentication runs first: a request without a valid token never reaches the middlewares. */
const authenticate = <E, R>(app: App<E, R>): App<E, Exclude<R, Customer> | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const token = request.headers["authorization"]?.match(/^Bearer (.+)$/)?.[1]
    const id = token === undefined ? undefined : tokens.get(token)
    if (id === undefined) {
      return Effect.succeed(HttpServerResponse.jsonUnsafe({ title: "Unauthorized" }, { status: 401 }))
    }
    return Effect.provideService(app, Customer, { id })
  })

/** Both middlewares key their state by the authenticated customer, never by something the client sends. */
const scope: ClientScope.ClientScope<Customer> = () => Effect.map(Customer, (customer) => customer.id)

export const ServerLive = Layer.unwrap(Effect.gen(function*() {
  const orders: Array<{ readonly id: number; readonly customer: string; readonly sku: unknown }> = []

  const createOrder = Effect.gen(function*() {
    const customer = yield* Customer
    const body = yield* HttpServerRequest.HttpServerRequest.pipe(Effect.flatMap((request) => request.json))
    const order = { id: orders.length + 1, customer: customer.id, sku: (body as { sku?: unknown }).sku }
    orders.push(order)
    return HttpServerResponse.jsonUnsafe(order, { status: 201, headers: { location: `/orders/${order.id}` } })
  }).pipe(Effect.catchTag("HttpServerError", () => HttpServerResponse.json({ title: "Bad JSON" }, { status: 400 })))

  const myOrders = Effect.map(
    Customer,
    (customer) => HttpServerResponse.jsonUnsafe(orders.filter((order) => order.customer === customer.id))
  )

  // built once, with the server: every request shares the store and the limiter
  const idempotent = yield* IdempotencyMiddleware.make({ scope })
  const limiter = yield* RateLimiter.tokenBucket({ capacity: 20, refillPerSecond: 5 })
  const limited = RateLimitMiddleware.make({ limiter, name: "orders", scope })

  return HttpRouter.serve(Layer.mergeAll(
    // authentication outermost, then the rate limit, then idempotency
    HttpRouter.add("POST", "/orders", createOrder.pipe(idempotent, limited, authenticate)),
    HttpRouter.add("GET", "/orders", myOrders.pipe(authenticate))
  ))
})).pipe(
  // each provided once, for the whole server (use the SQL or Redis stores for several processes)
  Layer.provide(IdempotencyStore.layerMemory),
  Layer.provide(RateLimiterStore.layerMemory)
)

// to run it:
// Layer.launch(ServerLive.pipe(Layer.provide(NodeHttpServer.layer(createServer, { port: 8080 }))))
//   .pipe(NodeRuntime.runMain)

// ---- the test: a real server on a free port, and a client whose relative URLs go to it ----

const TestLive = ServerLive.pipe(Layer.provideMerge(NodeHttpServer.layerTest))

const send = (request: HttpClientRequest.HttpClientRequest) =>
  HttpClient.execute(request).pipe(
    Effect.flatMap((response) =>
      Effect.map(response.json, (body) => ({ status: response.status, headers: response.headers, body }))
    )
  )

const authorized = (token: string | undefined) =>
  HttpClientRequest.setHeaders(token === undefined ? {} : { authorization: `Bearer ${token}` })

const placeOrder = (token: string | undefined, key: string, headers: Record<string, string> = {}) =>
  HttpClientRequest.post("/orders").pipe(
    authorized(token),
    HttpClientRequest.setHeaders({ "idempotency-key": key, ...headers }),
    HttpClientRequest.bodyJsonUnsafe({ sku: "BOOK-1" }),
    send
  )

const ordersOf = (token: string) => send(HttpClientRequest.get("/orders").pipe(authorized(token)))

/** What the `RateLimit` field says is left of the caller's quota. */
const remaining = (headers: Readonly<Record<string, string>>) =>
  Option.getOrUndefined(
    Option.flatMapNullishOr(
      RateLimitHeaders.parseRateLimit(headers["ratelimit"] ?? ""),
      (limits) => limits[0]?.remaining
    )
  )

describe("the server of docs/security.md", () => {
  it.effect("refuses a request without credentials before anything else", () =>
    Effect.gen(function*() {
      yield* placeOrder("alice-token", "key-1")
      const anonymous = yield* placeOrder(undefined, "key-1")
      expect(anonymous.status).toBe(401)
      const forged = yield* placeOrder("not-a-token", "key-1")
      expect(forged.status).toBe(401)
      expect((yield* ordersOf("alice-token")).body).toHaveLength(1)
    }).pipe(Effect.provide(TestLive)))

  it.effect("gives two customers using one Idempotency-Key their own orders", () =>
    Effect.gen(function*() {
      const alice = yield* placeOrder("alice-token", "key-1")
      const bob = yield* placeOrder("bob-token", "key-1")
      expect(alice.status).toBe(201)
      expect(bob.status).toBe(201)
      expect(alice.body).toMatchObject({ id: 1, customer: "alice" })
      expect(bob.body).toMatchObject({ id: 2, customer: "bob" })
      expect(bob.headers[IdempotencyMiddleware.replayedHeader]).toBeUndefined()
      expect((yield* ordersOf("alice-token")).body).toEqual([alice.body])
      expect((yield* ordersOf("bob-token")).body).toEqual([bob.body])
    }).pipe(Effect.provide(TestLive)))

  it.effect("answers the same customer's retry with a replay", () =>
    Effect.gen(function*() {
      const first = yield* placeOrder("alice-token", "key-1")
      const retry = yield* placeOrder("alice-token", "key-1")
      expect(retry.status).toBe(201)
      expect(retry.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
      expect(retry.headers["location"]).toBe("/orders/1")
      expect(retry.body).toEqual(first.body)
      expect((yield* ordersOf("alice-token")).body).toHaveLength(1) // one order, not two
    }).pipe(Effect.provide(TestLive)))

  it.effect("lets no header choose the scope", () =>
    Effect.gen(function*() {
      yield* placeOrder("alice-token", "key-1")
      yield* placeOrder("alice-token", "key-2")
      yield* placeOrder("alice-token", "key-3")
      // every client here connects from 127.0.0.1: an address scope would put them all together
      const claimsToBeAlice = {
        "x-forwarded-for": "127.0.0.1",
        forwarded: "for=127.0.0.1",
        "x-api-key": "alice",
        "x-user": "alice"
      }
      const bob = yield* placeOrder("bob-token", "key-1", claimsToBeAlice)
      expect(bob.status).toBe(201)
      expect(bob.headers[IdempotencyMiddleware.replayedHeader]).toBeUndefined() // not Alice's stored answer
      expect(bob.body).toMatchObject({ customer: "bob" })
      expect(remaining(bob.headers)).toBe(19) // his own quota of 20, untouched by Alice's three orders
      const nobody = yield* placeOrder(undefined, "key-1", claimsToBeAlice)
      expect(nobody.status).toBe(401)
      expect((yield* ordersOf("alice-token")).body).toHaveLength(3)
    }).pipe(Effect.provide(TestLive)))
})
