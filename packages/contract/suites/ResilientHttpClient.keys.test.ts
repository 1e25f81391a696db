/**
 * One Idempotency-Key per logical request, and a keyed request's 409 "still in progress" waited out — against an
 * in-memory orders service that honours keys as `IdempotencyMiddleware` does (the real middleware over sockets:
 * ResilientHttpClient.sockets.int.test.ts).
 */
import { bodyJson, fork, forkIn, HttpClient, HttpClientRequest, memoryResponse, scoped, TestClock } from "#edition"
import { describe, expect } from "@effect/vitest"
import { Effect, Exit, Fiber, Queue, Schedule } from "effect"
import { Deadline, Hedge, ResilientHttpClient } from "effect-resilience"
import { fast } from "./support/memoryHttp.js"

const inProgress = JSON.stringify({
  type: "urn:effect-resilience:problem:idempotency-key-in-progress",
  title: "A request with this Idempotency-Key is in progress",
  status: 409
})

/**
 * An in-memory orders service that honours Idempotency-Key the way `IdempotencyMiddleware` does: the first request
 * with a key runs; one that arrives while it runs gets the middleware's 409 "in progress" problem with
 * `Retry-After: 1`; one after it completed gets the stored answer. Each handler runs in a fiber of its own (forked
 * in the test's scope), so a client that stops waiting does not stop the work it started. Query parameters:
 * `delayMs` (answer and commit after it), `afterCommitMs` (commit at once, answer after it), `fail=500` (answer 500
 * and create nothing).
 */
const keyedOrders = Effect.gen(function*() {
  const scope = yield* Effect.scope
  /** The key of each request as it arrives (undefined for none). */
  const arrivals = yield* Queue.unbounded<string | undefined>()
  const created: Array<string> = []
  const records = new Map<string, { done: boolean; body: string }>()

  const handle = (key: string | undefined, params: URLSearchParams) =>
    Effect.gen(function*() {
      const record = key === undefined ? undefined : records.get(key)
      if (record !== undefined && !record.done) {
        return {
          status: 409,
          headers: { "content-type": "application/problem+json", "retry-after": "1" },
          body: inProgress
        }
      }
      if (record !== undefined) return { status: 201, headers: { "idempotent-replayed": "true" }, body: record.body }
      if (params.get("fail") === "500") return { status: 500, headers: {}, body: "failed" }
      const entry = { done: false, body: "" }
      if (key !== undefined) records.set(key, entry)
      const commit = () => {
        const id = `order-${created.length + 1}`
        created.push(id)
        entry.body = JSON.stringify({ id })
      }
      const delay = Number(params.get("delayMs") ?? 0)
      const afterCommit = Number(params.get("afterCommitMs") ?? 0)
      if (delay > 0) yield* Effect.sleep(delay)
      commit()
      if (afterCommit > 0) yield* Effect.sleep(afterCommit)
      entry.done = true
      return { status: 201, headers: {}, body: entry.body }
    })

  const client = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      const key = request.headers["idempotency-key"]
      yield* Queue.offer(arrivals, key)
      const served = yield* forkIn(handle(key, url.searchParams), scope)
      const { body, headers, status } = yield* Fiber.join(served)
      return memoryResponse(request, status, { headers, body })
    })
  )
  /** The order request of the tests, against `origin`. */
  const order = (origin: string) =>
    HttpClientRequest.post(`${origin}/orders`).pipe(
      bodyJson({ sku: "BOOK-1" })
    )
  return { client, arrivals, created: () => [...created], order }
})

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
  scoped("hedged copies of one request value carry one key: one order", () =>
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

  scoped(
    "Effect.retry around execute sends the same key again; a new request value gets a new one",
    () =>
      Effect.gen(function*() {
        const { arrivals, created, http, order } = yield* orders({ retry: false })
        // the first answers are 500s after nothing was created; the caller's own retry sends the same value again
        const failing = HttpClientRequest.setUrlParam(order, "fail", "500")
        const statusOk = Effect.flatMap(
          http.execute(failing),
          (r) => r.status === 500 ? Effect.fail("500") : Effect.void
        )
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
      })
  )

  scoped(
    "a keyed request that meets 409 'in progress' waits for its Retry-After and gets the order",
    () =>
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
      })
  )

  scoped(
    "a keyed 409 without Retry-After or the in-progress problem is returned as it is",
    () =>
      Effect.gen(function*() {
        const conflict = HttpClient.make((request) =>
          Effect.succeed(memoryResponse(request, 409, { body: "{\"title\":\"version conflict\"}" }))
        )
        const http = yield* ResilientHttpClient.make().pipe(Effect.provideService(HttpClient.HttpClient, conflict))
        expect((yield* http.post("http://orders.test/orders")).status).toBe(409)
      })
  )

  scoped("the key follows the value through the base client's own preprocessing", () =>
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
