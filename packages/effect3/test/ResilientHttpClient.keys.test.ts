/**
 * One Idempotency-Key per logical request, and a keyed request's 409 "still in progress" waited out — against
 * the real orders service (authentication, rate limit, idempotency, deadline middlewares), served in memory.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Queue, Schedule, TestClock } from "effect"
import { Backoff, Deadline, Hedge, IdempotencyStore, RateLimiterStore, ResilientHttpClient } from "../src/index.js"
import { appClient } from "./support/memoryHttp.js"
import { tappedOrders } from "./support/orders.js"

const fast = Backoff.exponential({ base: "100 millis", cap: "1 second" })

/** The orders service behind an in-memory client; `arrivals` gets each request's key as it comes in. */
const orders = (options: ResilientHttpClient.Options) =>
  Effect.gen(function*() {
    const service = yield* tappedOrders
    const base = yield* appClient(service.app)
    const http = yield* ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 3 }, ...options }).pipe(
      Effect.provideService(HttpClient.HttpClient, base)
    )
    const order = service.order("http://orders.test")
    return { http, base, arrivals: service.arrivals, created: service.created, order }
  }).pipe(Effect.provide(Layer.merge(IdempotencyStore.layerMemory, RateLimiterStore.layerMemory)))

describe("ResilientHttpClient: one key per logical request", () => {
  it.scoped("hedged copies of one request value carry one key: one order", () =>
    Effect.gen(function*() {
      const { arrivals, created, http, order } = yield* orders({})
      const slow = HttpClientRequest.setUrlParam(order, "delayMs", "1000")
      const call = yield* Effect.fork(
        http.execute(slow).pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 }), Effect.map((r) => r.status))
      )
      yield* TestClock.adjust("300 millis")
      const keys = [yield* Queue.take(arrivals), yield* Queue.take(arrivals), yield* Queue.take(arrivals)]
      yield* TestClock.adjust("5 seconds")
      expect(yield* Fiber.join(call)).toBe(201)
      expect(keys[0]).toBeDefined()
      expect(new Set(keys).size).toBe(1)
      expect(created()).toHaveLength(1)
    }))

  it.scoped("Effect.retry around execute sends the same key again; a new request value gets a new one", () =>
    Effect.gen(function*() {
      const { arrivals, created, http, order } = yield* orders({ retry: false })
      // the first answer is a 500 after nothing was created; the caller's own retry sends the same value again
      const failing = HttpClientRequest.setUrlParam(order, "fail", "500")
      const statusOk = Effect.flatMap(http.execute(failing), (r) => r.status === 500 ? Effect.fail("500") : Effect.void)
      yield* Effect.exit(statusOk.pipe(Effect.retry(Schedule.recurs(2))))
      const keys = [yield* Queue.take(arrivals), yield* Queue.take(arrivals), yield* Queue.take(arrivals)]
      expect(new Set(keys).size).toBe(1)
      yield* http.execute(order)
      yield* http.execute(order)
      const again = [yield* Queue.take(arrivals), yield* Queue.take(arrivals)]
      expect(again[0]).toBe(again[1])
      expect(again[0]).not.toBe(keys[0])
      expect(created()).toHaveLength(1)
      // a new value is a new logical request
      yield* http.execute(HttpClientRequest.setUrlParam(order, "n", "2"))
      expect(yield* Queue.take(arrivals)).not.toBe(again[0])
      expect(created()).toHaveLength(2)
    }))

  it.scoped("a keyed request that meets 409 'in progress' waits for its Retry-After and gets the order", () =>
    Effect.gen(function*() {
      // the order commits at once and is answered after 1.5 s; each attempt gives up after 500 ms
      const { arrivals, created, http, order } = yield* orders({ attemptTimeout: "500 millis" })
      const late = HttpClientRequest.setUrlParam(order, "afterCommitMs", "1500")
      const call = yield* Effect.fork(
        http.execute(late).pipe(
          Effect.flatMap((r) => Effect.map(r.json, (json) => [r.status, json] as const)),
          Deadline.within("10 seconds"),
          Effect.exit
        )
      )
      yield* TestClock.adjust("3 seconds")
      const exit = yield* Fiber.join(call)
      expect(Exit.map(exit, ([status]) => status)).toEqual(Exit.succeed(201))
      expect(created()).toHaveLength(1)
      // the first attempt, its retry that met the 409, and the one after its Retry-After, all with one key
      const keys = [yield* Queue.take(arrivals), yield* Queue.take(arrivals), yield* Queue.take(arrivals)]
      expect(new Set(keys).size).toBe(1)
    }))

  it.scoped("the key follows the value through the base client's own preprocessing", () =>
    Effect.gen(function*() {
      const { arrivals, base, created, order } = yield* orders({})
      // a base client that makes relative URLs absolute: a new request object on every execution
      const http = yield* ResilientHttpClient.make({ retry: false }).pipe(
        Effect.provideService(
          HttpClient.HttpClient,
          HttpClient.mapRequest(base, HttpClientRequest.prependUrl("http://orders.test"))
        )
      )
      const relative = HttpClientRequest.modify(order, { url: "/orders" })
      yield* http.execute(relative)
      yield* http.execute(relative)
      expect(yield* Queue.take(arrivals)).toBe(yield* Queue.take(arrivals))
      expect(created()).toHaveLength(1)
    }))
})
