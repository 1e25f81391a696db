/**
 * The orders service shared by `npm run serve` and `npm run demo`: how the server-side pieces compose.
 *
 * POST /orders         authentication → rate limit → idempotency → handler: 201 { id, ...body } with
 *                      Location: /orders/<id>
 * GET  /orders/:id     the caller's order, or 404 problem+json
 * GET  /orders         the orders this process created for the caller (the demo counts duplicates with it)
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
} from "../src/index.js"

export interface OrdersOptions {
  readonly rate: { readonly capacity: number; readonly refillPerSecond: number }
  readonly idempotency?: Omit<IdempotencyMiddleware.Options, "scope">
  /** API keys and the customer each one authenticates; without them, callers are told apart by address. */
  readonly apiKeys?: ReadonlyMap<string, string>
  /**
   * Load shedding in front of `POST /orders` (`LoadShedMiddleware`), the first middleware a request meets: a
   * refusal costs no authentication, no rate-limit token and no idempotency claim.
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
}

export interface Order {
  readonly id: string
  readonly [field: string]: unknown
}

/** The longest wait a fault hook accepts, in milliseconds. */
export const maxHookMillis = 30_000

const problem = (status: number, title: string, detail: string) =>
  HttpServerResponse.text(
    JSON.stringify({ type: "about:blank", title, status, detail }),
    { status, contentType: "application/problem+json" }
  )

const badRequest = (detail: string) => problem(400, "Bad Request", detail)

interface Hooks {
  readonly delayMs: number
  readonly afterCommitMs: number
  readonly crash: boolean
  readonly fail: boolean
}

/** The fault hooks of a request, or what is wrong with them. */
const parseHooks = (params: URLSearchParams): Hooks | { readonly invalid: string } => {
  const wait = (name: string) => {
    const text = params.get(name)
    if (text === null) return 0
    return /^\d{1,5}$/.test(text) && Number(text) <= maxHookMillis ? Number(text) : undefined
  }
  const flag = (name: string, only: string) => {
    const text = params.get(name)
    return text === null ? false : text === only ? true : undefined
  }
  const delayMs = wait("delayMs")
  const afterCommitMs = wait("afterCommitMs")
  const crash = flag("crash", "1")
  const fail = flag("fail", "500")
  if (delayMs === undefined || afterCommitMs === undefined) {
    return { invalid: `?delayMs and ?afterCommitMs take a whole number of milliseconds from 0 to ${maxHookMillis}` }
  }
  if (crash === undefined) return { invalid: "?crash accepts only 1" }
  if (fail === undefined) return { invalid: "?fail accepts only 500" }
  return { delayMs, afterCommitMs, crash, fail }
}

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
    const created: Array<Order & { readonly owner: string }> = []
    const byId = new Map<string, Order & { readonly owner: string }>()
    const prefix = process.pid.toString(36)
    const guarded = authenticate(options.apiKeys)
    /** The caller's orders, for the read endpoints. */
    const mine = (f: (orders: ReadonlyArray<Order>) => HttpServerResponse.HttpServerResponse) =>
      guarded(Effect.map(Customer, (customer) =>
        f(
          created.filter((order) => order.owner === customer.id).map(({ owner: _, ...order }) => order)
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
      const body = yield* request.json.pipe(Effect.orElseSucceed(() => null))
      if (typeof body !== "object" || body === null || Array.isArray(body)) {
        return badRequest("expected a JSON object")
      }
      const owner = (yield* Customer).id
      const order: Order = { ...body, id: `${prefix}-${created.length + 1}` }
      created.push({ ...order, owner }) // the commit: from here on the order exists, whatever happens to the response
      byId.set(order.id, { ...order, owner })
      if (hooks.afterCommitMs > 0) yield* Effect.sleep(hooks.afterCommitMs)
      return HttpServerResponse.unsafeJson(order, { status: 201, headers: { location: `/orders/${order.id}` } })
    })

    const getOrder = Effect.flatMap(HttpRouter.params, (params) =>
      mine((orders) => {
        const order = orders.find((o) => o.id === params["id"])
        return order === undefined
          ? problem(404, "Not Found", `no order with id ${JSON.stringify(params["id"] ?? "")}`)
          : HttpServerResponse.unsafeJson(order)
      }))

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
    return { app, created: (): ReadonlyArray<Order> => created.map(({ owner: _, ...order }) => order) }
  })
