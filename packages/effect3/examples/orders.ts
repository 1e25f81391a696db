/**
 * The orders service shared by `npm run serve` and `npm run demo`: how the server-side pieces compose.
 *
 * POST /orders         authentication → rate limit → idempotency → handler: 201 { id, ...body } with
 *                      Location: /orders/<id>
 * GET  /orders/:id     the caller's order, or 404 problem+json
 * GET  /orders         the orders this process created for the caller and still keeps (the demo counts
 *                      duplicates with it)
 * GET  /orders/count   { count }: how many of them
 * GET  /health         200
 *
 * Who the caller is: with `apiKeys`, the customer whose `X-Api-Key` the request carries (401 without a known
 * one) — authentication runs first, and the idempotency keys, the rate-limit quota and the orders belong to
 * that customer. Without `apiKeys`, the address of the connection. Never an unchecked header.
 *
 * Demo fault hooks on POST /orders (query parameters; a bad value is a 400 before anything happens):
 *   ?delayMs=n         wait n ms (0 to 30 000) before doing anything
 *   ?afterCommitMs=n   create the order, then wait n ms (0 to 30 000) before answering: "committed, answer late"
 *   ?fail=500          answer 500 without creating anything
 *   ?crash=1           die (a defect) without creating anything
 *
 * A request carrying `Request-Timeout-Ms` runs under that deadline, at most 30 s; without it no deadline
 * applies, which is why the hooks' waits are capped on their own.
 *
 * What it keeps is bounded, so no client can make it run out of memory: an order body is at most
 * `maxOrderBytes` (4 KiB; a larger one gets 413 before anything is created), and the orders kept for the read
 * endpoints take at most about `maxKeptBytes` (32 MiB) in all, the oldest forgotten first.
 */
import { type HttpApp, HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Effect } from "effect"
import {
  ClientScope,
  DeadlineMiddleware,
  IdempotencyMiddleware,
  LoadShedMiddleware,
  RateLimiter,
  RateLimitMiddleware
} from "effect-resilience"
import {
  keptOrders,
  maxKeptBytes,
  maxOrderBytes,
  type Order,
  parseHooks
} from "../../../examples/support/ordersModel.js"

export {
  keptOrders,
  maxHookMillis,
  maxKeptBytes,
  maxOrderBytes,
  type Order
} from "../../../examples/support/ordersModel.js"

export interface OrdersOptions {
  readonly rate: { readonly capacity: number; readonly refillPerSecond: number }
  readonly idempotency?: Omit<IdempotencyMiddleware.Options, "scope">
  /** API keys and the customer each one authenticates; without them, callers are told apart by address. */
  readonly apiKeys?: ReadonlyMap<string, string>
  /**
   * Load shedding in front of `POST /orders` (`LoadShedMiddleware`), the first middleware a request meets: a
   * refusal costs no authentication, no rate-limit token and no idempotency claim. It reads the body before
   * admission (a client still uploading holds no slot; one slower than 5 s gets 408), and an order whose client
   * stopped waiting keeps its slot until the idempotency middleware's handler has made it.
   */
  readonly shed?: LoadShedMiddleware.Options
  /**
   * Makes creating an order a resource of fixed capacity, for overload experiments: at most `concurrency`
   * orders are created at once, each taking `serviceMillis`; the others wait in line (first in, first out), so
   * latency grows with the line.
   */
  readonly capacity?: { readonly concurrency: number; readonly serviceMillis: number }
  /** Runs between the network and the rest of `POST /orders` (the demo's unreliable network). */
  readonly network?: <E, R>(app: HttpApp.Default<E, R>) => HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest>
  /** Bounds of what the service keeps (see the module's comment). */
  readonly keep?: { readonly maxOrderBytes?: number; readonly maxKeptBytes?: number }
}

const problem = (status: number, title: string, detail: string) =>
  HttpServerResponse.text(
    JSON.stringify({ type: "about:blank", title, status, detail }),
    { status, contentType: "application/problem+json" }
  )

const badRequest = (detail: string) => problem(400, "Bad Request", detail)

const tooLarge = (max: number) => problem(413, "Content Too Large", `an order body is at most ${max} bytes`)

/** The authenticated caller, provided by the authentication middleware to everything inside it. */
export class Customer extends Context.Tag("orders/Customer")<Customer, { readonly id: string }>() {}

/**
 * Authentication, before everything else: with `apiKeys`, a known `X-Api-Key` provides its {@link Customer}
 * and anything else is a 401; without them, the caller is known by the address of its connection.
 */
const authenticate = (apiKeys: ReadonlyMap<string, string> | undefined) => {
  const byAddress = ClientScope.address()
  return <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, Exclude<R, Customer>> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (apiKeys === undefined) {
        return Effect.matchEffect(byAddress(request), {
          onFailure: () =>
            Effect.succeed(problem(500, "Internal Server Error", "the server cannot tell who is asking")),
          onSuccess: (address) => Effect.provideService(app, Customer, { id: `address:${address}` })
        })
      }
      const key = request.headers["x-api-key"]
      const id = key === undefined ? undefined : apiKeys.get(key)
      if (id === undefined) return Effect.succeed(problem(401, "Unauthorized", "send a valid X-Api-Key"))
      return Effect.provideService(app, Customer, { id: `customer:${id}` })
    })
}

/** The scope of both middlewares and the owner of the orders: the authenticated customer. */
const scope: ClientScope.ClientScope<Customer> = () => Effect.map(Customer, (customer) => customer.id)

export const makeOrdersApp = (options: OrdersOptions) =>
  Effect.gen(function*() {
    const orderLimit = options.keep?.maxOrderBytes ?? maxOrderBytes
    const kept = keptOrders(options.keep?.maxKeptBytes ?? maxKeptBytes)
    let sequence = 0
    const prefix = process.pid.toString(36)
    const guarded = authenticate(options.apiKeys)
    /** The caller's orders, for the read endpoints. */
    const mine = (f: (orders: ReadonlyArray<Order>) => HttpServerResponse.HttpServerResponse) =>
      guarded(Effect.map(Customer, (customer) =>
        f(
          Array.from(kept.all()).filter((k) => k.owner === customer.id).map((k) => k.order)
        )))

    const createOrder = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const params = new URL(request.url, "http://localhost").searchParams
      const hooks = parseHooks(params)
      if ("invalid" in hooks) {
        return badRequest(hooks.invalid)
      }
      if (hooks.delayMs > 0) yield* Effect.sleep(hooks.delayMs)
      if (hooks.crash) return yield* Effect.die(new Error("the handler crashed (?crash=1)"))
      if (hooks.fail) return HttpServerResponse.text("failed on purpose (?fail=500)", { status: 500 })
      const text = yield* request.text.pipe(Effect.orElseSucceed(() => ""))
      const size = Buffer.byteLength(text)
      if (size > orderLimit) return tooLarge(orderLimit)
      const body = yield* Effect.try(() => JSON.parse(text) as unknown).pipe(Effect.orElseSucceed(() => null))
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return badRequest("expected a JSON object")
      }
      const owner = (yield* Customer).id
      const order: Order = { ...body, id: `${prefix}-${++sequence}` }
      kept.add(order, owner, size) // the commit: from here on the order exists, whatever happens to the response
      if (hooks.afterCommitMs > 0) yield* Effect.sleep(hooks.afterCommitMs)
      return HttpServerResponse.unsafeJson(order, { status: 201, headers: { location: `/orders/${order.id}` } })
    })

    const getOrder = Effect.flatMap(HttpRouter.params, (params) =>
      guarded(Effect.map(Customer, (customer) => {
        const found = kept.get(params["id"] ?? "")
        return found === undefined || found.owner !== customer.id
          ? problem(404, "Not Found", `no order with id ${JSON.stringify(params["id"] ?? "")}`)
          : HttpServerResponse.unsafeJson(found.order)
      })))

    const limiter = yield* RateLimiter.tokenBucket({
      capacity: options.rate.capacity,
      refillPerSecond: options.rate.refillPerSecond
    })
    // taken once, here: every request shares the store the caller of makeOrdersApp provides
    const idempotent = yield* IdempotencyMiddleware.make({ ...options.idempotency, scope })
    const shed = options.shed === undefined ? undefined : yield* LoadShedMiddleware.make(options.shed)
    const capacity = options.capacity
    const serviceMillis = capacity?.serviceMillis ?? 0
    const resource = capacity === undefined ? undefined : yield* Effect.makeSemaphore(capacity.concurrency)
    const create = resource === undefined
      ? createOrder
      : resource.withPermits(1)(Effect.zipRight(Effect.sleep(serviceMillis), createOrder))
    const orders = create.pipe(
      idempotent,
      RateLimitMiddleware.make({ limiter, name: "orders", scope }), // refuses before a key is claimed
      guarded, // authentication first: the scopes above read the customer it provides
      shed ?? ((app) => app),
      options.network ?? ((app) => app)
    )
    const app = HttpRouter.empty.pipe(
      HttpRouter.post("/orders", orders),
      HttpRouter.get("/orders", mine((orders) => HttpServerResponse.unsafeJson(orders))),
      HttpRouter.get("/orders/count", mine((orders) => HttpServerResponse.unsafeJson({ count: orders.length }))),
      HttpRouter.get("/orders/:id", getOrder),
      HttpRouter.get("/health", HttpServerResponse.text("ok")),
      DeadlineMiddleware.make({ maxTimeout: "30 seconds" })
    )
    return { app, created: (): ReadonlyArray<Order> => Array.from(kept.all(), (k) => k.order) }
  })
