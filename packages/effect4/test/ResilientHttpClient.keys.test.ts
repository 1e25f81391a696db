/**
 * One Idempotency-Key per logical request, and a keyed request's 409 "still in progress" waited out — against an
 * in-memory orders service that honours keys as `IdempotencyMiddleware` does (test/support/keyedOrders.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Queue, Schedule } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { TestClock } from "effect/testing"
import { Deadline, Hedge, ResilientHttpClient } from "../src/index.js"
import { keyedOrders } from "./support/keyedOrders.js"
import { memoryResponse } from "./support/memoryHttp.js"
import { fast, fork } from "./support/resilientClient.js"

/** The orders service behind an in-memory client. */
const orders = (options: ResilientHttpClient.Options) =>
  Effect.gen(function*() {
    const service = yield* keyedOrders
    const http = yield* ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 3 }, ...options }).pipe(
      Effect.provideService(HttpClient.HttpClient, service.client)
    )
    return { ...service, http, order: service.order("http://orders.test") }
  })

const takeN = <A>(queue: Queue.Queue<A>, n: number) =>
  Effect.forEach(Array.from({ length: n }), () => Queue.take(queue))

describe("ResilientHttpClient: one key per logical request", () => {
  it.effect("hedged copies of one request value carry one key: one order", () =>
    Effect.gen(function*() {
      const { arrivals, created, http, order } = yield* orders({})
      const slow = HttpClientRequest.setUrlParam(order, "delayMs", "1000")
      const call = yield* fork(
        http.execute(slow).pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 }), Effect.map((r) => r.status))
      )
      yield* TestClock.adjust("300 millis")
      const keys = yield* takeN(arrivals, 3)
      yield* TestClock.adjust("5 seconds")
      expect(yield* Fiber.join(call)).toBe(201)
      expect(keys[0]).toBeDefined()
      expect(new Set(keys).size).toBe(1)
      expect(created()).toHaveLength(1)
    }))

  it.effect("Effect.retry around execute sends the same key again; a new request value gets a new one", () =>
    Effect.gen(function*() {
      const { arrivals, created, http, order } = yield* orders({ retry: false })
      // the first answers are 500s after nothing was created; the caller's own retry sends the same value again
      const failing = HttpClientRequest.setUrlParam(order, "fail", "500")
      const statusOk = Effect.flatMap(http.execute(failing), (r) => r.status === 500 ? Effect.fail("500") : Effect.void)
      yield* Effect.exit(statusOk.pipe(Effect.retry(Schedule.recurs(2))))
      const keys = yield* takeN(arrivals, 3)
      expect(new Set(keys).size).toBe(1)
      yield* http.execute(order)
      yield* http.execute(order)
      const again = yield* takeN(arrivals, 2)
      expect(again[0]).toBe(again[1])
      expect(again[0]).not.toBe(keys[0])
      expect(created()).toHaveLength(1)
      // a new value is a new logical request
      yield* http.execute(HttpClientRequest.setUrlParam(order, "n", "2"))
      expect(yield* Queue.take(arrivals)).not.toBe(again[0])
      expect(created()).toHaveLength(2)
    }))

  it.effect("a keyed request that meets 409 'in progress' waits for its Retry-After and gets the order", () =>
    Effect.gen(function*() {
      // the order commits at once and is answered after 1.5 s; each attempt gives up after 500 ms
      const { arrivals, created, http, order } = yield* orders({ attemptTimeout: "500 millis" })
      const late = HttpClientRequest.setUrlParam(order, "afterCommitMs", "1500")
      const call = yield* fork(
        http.execute(late).pipe(
          Effect.flatMap((r) => Effect.map(r.json, (json) => [r.status, json] as const)),
          Deadline.within("10 seconds"),
          Effect.exit
        )
      )
      yield* TestClock.adjust("3 seconds")
      const exit = yield* Fiber.join(call)
      expect(Exit.map(exit, ([status, json]) => [status, json])).toEqual(Exit.succeed([201, { id: "order-1" }]))
      expect(created()).toHaveLength(1)
      // the first attempt, its retry that met the 409, and the one after its Retry-After, all with one key
      const keys = yield* takeN(arrivals, 3)
      expect(new Set(keys).size).toBe(1)
      expect(yield* Queue.size(arrivals)).toBe(0)
    }))

  it.effect("a keyed 409 without Retry-After or the in-progress problem is returned as it is", () =>
    Effect.gen(function*() {
      const conflict = HttpClient.make((request) =>
        Effect.succeed(memoryResponse(request, 409, { body: "{\"title\":\"version conflict\"}" }))
      )
      const http = yield* ResilientHttpClient.make().pipe(Effect.provideService(HttpClient.HttpClient, conflict))
      expect((yield* http.post("http://orders.test/orders")).status).toBe(409)
    }))

  it.effect("the key follows the value through the base client's own preprocessing", () =>
    Effect.gen(function*() {
      const service = yield* keyedOrders
      // a base client that makes relative URLs absolute: a new request object on every execution
      const http = yield* ResilientHttpClient.make({ retry: false }).pipe(
        Effect.provideService(
          HttpClient.HttpClient,
          HttpClient.mapRequest(service.client, HttpClientRequest.prependUrl("http://orders.test"))
        )
      )
      const relative = HttpClientRequest.modify(service.order(""), { url: "/orders" })
      yield* http.execute(relative)
      yield* http.execute(relative)
      expect(yield* Queue.take(service.arrivals)).toBe(yield* Queue.take(service.arrivals))
      expect(service.created()).toHaveLength(1)
    }))
})
