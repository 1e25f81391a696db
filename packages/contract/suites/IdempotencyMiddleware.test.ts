/**
 * The idempotency middleware's behaviour, served in memory (./support/idempotencyServer.ts) over the memory store.
 * What needs real sockets (a target as sent, a body an outer middleware read from the socket) is in each edition's
 * socket tests.
 */
import { fork, HttpServerRequest, HttpServerResponse, jsonResponse, scoped, setCookie, TestClock } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Data, Deferred, Effect, Fiber, Layer } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import { type Send, serve } from "./support/idempotencyServer.js"

type App = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>

/** An orders endpoint (POST creates, GET lists) that counts how often its handler really ran. */
const makeOrders = (
  behaviour: (n: number) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, any> = (n) =>
    Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) =>
        Effect.flatMap(Effect.orDie(request.json), (body) =>
          HttpServerResponse.json({ id: n, ...(body as object) }, {
            status: 201,
            headers: { location: `/orders/${n}` }
          }).pipe(Effect.orDie, Effect.map(setCookie("session", "secret"))))
    )
) => {
  let runs = 0
  const create = Effect.suspend(() => behaviour(++runs))
  /** Wraps the POST handler with `middleware`, as a route does. */
  const router = (middleware: (app: App) => App): App =>
    Effect.flatMap(
      HttpServerRequest.HttpServerRequest,
      (request) => request.method === "POST" ? middleware(create) : Effect.succeed(HttpServerResponse.text("list"))
    )
  return { router, runs: () => runs }
}

/** Orders whose handler signals `entered`, then waits for `gate` before answering 201. */
const gatedOrders = Effect.gen(function*() {
  const gate = yield* Deferred.make<void>()
  const entered = yield* Deferred.make<void>()
  const orders = makeOrders((n) =>
    Deferred.succeed(entered, undefined).pipe(
      Effect.andThen(Deferred.await(gate)),
      Effect.as(jsonResponse({ id: n }, { status: 201 }))
    )
  )
  return { entered, gate, orders }
})

/** Serves `app`; `post(path, init)` sends a POST to it. */
const served = (app: App) =>
  Effect.map(serve(app), (send) => ({
    send,
    post: (path: string, init: Omit<Send, "path" | "method"> = {}) => send({ ...init, path, method: "POST" })
  }))

const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(IdempotencyStore.layerMemory))

describe("IdempotencyMiddleware", () => {
  scoped("runs the first request and replays it for the same key", () =>
    withStore(Effect.gen(function*() {
      const orders = makeOrders()
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
      const first = yield* post("/orders", { key: "k-1", body: { sku: "BOOK-1" } })
      const again = yield* post("/orders", { key: "k-1", body: { sku: "BOOK-1" } })
      expect(first.status).toBe(201)
      expect(JSON.parse(first.body)).toEqual({ id: 1, sku: "BOOK-1" })
      expect(first.headers["set-cookie"]).toContain("session=secret")
      expect(first.headers["idempotent-replayed"]).toBeUndefined()
      expect(again.status).toBe(201)
      expect(again.body).toBe(first.body)
      expect(again.headers["content-type"]).toBe(first.headers["content-type"])
      expect(again.headers["location"]).toBe("/orders/1")
      expect(again.headers["idempotent-replayed"]).toBe("true")
      expect(again.headers["set-cookie"]).toBeUndefined()
      expect(orders.runs()).toBe(1)
    })))

  scoped(
    "accepts the key as a Structured Fields string or a bare token (the same key)",
    () =>
      withStore(Effect.gen(function*() {
        const orders = makeOrders()
        const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
        yield* post("/orders", { key: "\"abc-123\"" })
        const bare = yield* post("/orders", { key: "abc-123" })
        expect(bare.headers["idempotent-replayed"]).toBe("true")
        expect(orders.runs()).toBe(1)
      }))
  )

  scoped(
    "answers 400 problem+json for a missing, empty, too long or non-ASCII key",
    () =>
      withStore(Effect.gen(function*() {
        const orders = makeOrders()
        const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
        for (const key of [undefined, "", "   ", "x".repeat(256), "\"unterminated", "two words"]) {
          const reply = yield* post("/orders", key === undefined ? {} : { key })
          expect(reply.status, `key ${JSON.stringify(key)}`).toBe(400)
          expect(reply.headers["content-type"]).toBe("application/problem+json")
          expect(JSON.parse(reply.body).status).toBe(400)
        }
        // a byte outside printable ASCII (a control character cannot even be put in a web request's headers)
        expect((yield* post("/orders", { key: "cl\u00e9" })).status).toBe(400)
        expect((yield* post("/orders", { key: "x".repeat(255) })).status).toBe(201)
        expect(orders.runs()).toBe(1)
      }))
  )

  scoped("answers 422 when the key is reused with another body or path", () =>
    withStore(Effect.gen(function*() {
      const orders = makeOrders()
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
      yield* post("/orders", { key: "k", body: { qty: 1 } })
      const other = yield* post("/orders", { key: "k", body: { qty: 9 } })
      expect(other.status).toBe(422)
      expect(JSON.parse(other.body).type).toContain("idempotency-key-reused")
      expect(orders.runs()).toBe(1)
    })))

  scoped(
    "answers 409 with Retry-After while the first request is still running",
    () =>
      withStore(Effect.gen(function*() {
        const { entered, gate, orders } = yield* gatedOrders
        const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
        const first = yield* fork(post("/orders", { key: "slow" }))
        yield* Deferred.await(entered)
        const second = yield* post("/orders", { key: "slow" })
        expect(second.status).toBe(409)
        expect(second.headers["retry-after"]).toBe("1")
        yield* Deferred.succeed(gate, undefined)
        expect((yield* Fiber.join(first)).status).toBe(201)
        expect((yield* post("/orders", { key: "slow" })).headers["idempotent-replayed"]).toBe("true")
        expect(orders.runs()).toBe(1)
      }))
  )

  scoped(
    "50 simultaneous duplicates run the handler once; every answer is 201 or 409",
    () =>
      withStore(Effect.gen(function*() {
        const orders = makeOrders()
        const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
        const replies = yield* Effect.forEach(
          Array.from({ length: 50 }, () => post("/orders", { key: "dup", body: { sku: "A" } })),
          (request) => request,
          { concurrency: "unbounded" }
        )
        expect(orders.runs()).toBe(1)
        for (const reply of replies) expect([201, 409]).toContain(reply.status)
        const created = replies.filter((r) => r.status === 201)
        expect(new Set(created.map((r) => r.body)).size).toBe(1)
      }))
  )

  scoped(
    "a handler defect is stored as the 500 the server answered: it may have committed first",
    () =>
      withStore(Effect.gen(function*() {
        const orders = makeOrders((n) =>
          n === 1 ? Effect.die(new Error("crash")) : Effect.succeed(jsonResponse({ id: n }, { status: 201 }))
        )
        const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
        expect((yield* post("/orders", { key: "crashy" })).status).toBe(500)
        const retry = yield* post("/orders", { key: "crashy" })
        expect(retry.status).toBe(500)
        expect(retry.headers["idempotent-replayed"]).toBe("true")
        expect(orders.runs()).toBe(1)
      }))
  )

  scoped(
    "a typed failure says the handler did nothing: the key is released and a retry runs again",
    () =>
      withStore(Effect.gen(function*() {
        class Unavailable extends Data.TaggedError("Unavailable") {}
        let runs = 0
        const handler = Effect.suspend(() =>
          ++runs === 1 ? Effect.fail(new Unavailable()) : Effect.succeed(HttpServerResponse.text("ok", { status: 201 }))
        )
        const idempotent = yield* IdempotencyMiddleware.make()
        const { post } = yield* served(handler.pipe(idempotent))
        expect((yield* post("/orders", { key: "typed" })).status).toBe(500)
        const retry = yield* post("/orders", { key: "typed" })
        expect(retry.status).toBe(201)
        expect(retry.headers["idempotent-replayed"]).toBeUndefined()
        expect(runs).toBe(2)
      }))
  )

  scoped("5xx responses are stored and replayed by default", () =>
    withStore(Effect.gen(function*() {
      const orders = makeOrders(() => Effect.succeed(HttpServerResponse.text("boom", { status: 500 })))
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
      yield* post("/orders", { key: "five" })
      const replay = yield* post("/orders", { key: "five" })
      expect(replay.status).toBe(500)
      expect(replay.body).toBe("boom")
      expect(replay.headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(1)
    })))

  scoped("storeServerErrors: false releases the key on 5xx", () =>
    withStore(Effect.gen(function*() {
      const orders = makeOrders((n) =>
        Effect.succeed(HttpServerResponse.text(`attempt ${n}`, { status: n === 1 ? 500 : 201 }))
      )
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make({ storeServerErrors: false })))
      expect((yield* post("/orders", { key: "k" })).status).toBe(500)
      expect((yield* post("/orders", { key: "k" })).status).toBe(201)
      expect((yield* post("/orders", { key: "k" })).headers["idempotent-replayed"]).toBe("true")
      expect(orders.runs()).toBe(2)
    })))

  scoped("bodies over maxBodyBytes get 413 and never reach the handler", () =>
    withStore(Effect.gen(function*() {
      const orders = makeOrders()
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make({ maxBodyBytes: 100 })))
      const big = yield* post("/orders", { key: "big", body: { blob: "x".repeat(200) } })
      expect(big.status).toBe(413)
      // no Content-Length: the body is streamed, and the read stops once it is too large
      const chunk = new TextEncoder().encode("x".repeat(80))
      const stream = new ReadableStream<Uint8Array>({
        start: (controller) => {
          controller.enqueue(chunk)
          controller.enqueue(chunk)
          controller.close()
        }
      })
      const chunked = yield* post("/orders", {
        key: "chunky",
        body: stream,
        headers: { "transfer-encoding": "chunked" }
      })
      expect(chunked.status).toBe(413)
      expect(orders.runs()).toBe(0)
    })))

  scoped("other methods pass through; keys are scoped per client address", () =>
    withStore(Effect.gen(function*() {
      const orders = makeOrders()
      const { post, send } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
      expect((yield* send({ path: "/orders" })).body).toBe("list")
      const first = yield* post("/orders", { key: "same", body: { sku: "A" } })
      const other = yield* post("/orders", { key: "same", body: { sku: "A" }, from: "127.0.0.2" })
      expect(first.headers["idempotent-replayed"]).toBeUndefined()
      expect(other.headers["idempotent-replayed"]).toBeUndefined()
      expect(JSON.parse(other.body).id).toBe(2)
      expect(orders.runs()).toBe(2)
    })))

  scoped("replays are byte-exact for binary bodies", () =>
    withStore(Effect.gen(function*() {
      const bytes = new Uint8Array([0, 255, 1, 254, 128, 10, 13])
      const orders = makeOrders(() =>
        Effect.succeed(HttpServerResponse.uint8Array(bytes, { status: 200, contentType: "application/octet-stream" }))
      )
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
      const fetchBytes = Effect.map(
        post("/orders", { key: "bin" }),
        (r) => [r.headers["content-type"], [...r.bytes]] as const
      )
      const first = yield* fetchBytes
      const again = yield* fetchBytes
      expect(again).toEqual(first)
      expect(again[1]).toEqual([...bytes])
      expect(orders.runs()).toBe(1)
    })))

  scoped("completed keys expire after the TTL", () =>
    withStore(Effect.gen(function*() {
      const orders = makeOrders()
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make({ ttl: "1 hour" })))
      yield* post("/orders", { key: "ttl" })
      yield* TestClock.adjust("59 minutes")
      expect((yield* post("/orders", { key: "ttl" })).headers["idempotent-replayed"]).toBe("true")
      yield* TestClock.adjust("2 minutes")
      expect((yield* post("/orders", { key: "ttl" })).headers["idempotent-replayed"]).toBeUndefined()
      expect(orders.runs()).toBe(2)
    })))

  scoped(
    "a live handler renews its lease, so a slow request is not taken over",
    () =>
      withStore(Effect.gen(function*() {
        const { entered, gate, orders } = yield* gatedOrders
        const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make({ lease: "3 seconds" })))
        const first = yield* fork(post("/orders", { key: "slow" }))
        yield* Deferred.await(entered)
        for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
        expect((yield* post("/orders", { key: "slow" })).status).toBe(409)
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(first)
        expect(orders.runs()).toBe(1)
      }))
  )

  scoped("fails closed with 503 when the store is down: the handler does not run", () =>
    Effect.gen(function*() {
      const orders = makeOrders()
      const { post } = yield* served(orders.router(yield* IdempotencyMiddleware.make()))
      const reply = yield* post("/orders", { key: "down" })
      expect(reply.status).toBe(503)
      expect(reply.headers["retry-after"]).toBe("1")
      expect(orders.runs()).toBe(0)
    }).pipe(Effect.provide(
      Layer.succeed(IdempotencyStore.IdempotencyStore, {
        claim: () => Effect.fail(new IdempotencyStore.IdempotencyStoreError({ operation: "claim", cause: "down" })),
        complete: () => Effect.succeed(false),
        renew: () => Effect.succeed(false),
        release: () => Effect.void
      })
    )))

  scoped(
    "works under a router prefix, and after an outer middleware read the body",
    () =>
      withStore(Effect.gen(function*() {
        const orders = makeOrders()
        // a mount strips its prefix from the url (the original target keeps it)
        const mounted = (app: App): App =>
          Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) =>
              Effect.provideService(
                app,
                HttpServerRequest.HttpServerRequest,
                request.modify({ url: request.url.slice(4) })
              )
          )
        // Effect 4's requests cache the body they read (a copy made by `modify` starts without the cache)
        const readFirst = (app: App): App =>
          Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) => Effect.andThen(Effect.orDie(request.text), app)
          )
        const idempotent = yield* IdempotencyMiddleware.make()
        for (
          const [app, path] of [[mounted(orders.router(idempotent)), "/api/orders"], [
            readFirst(orders.router(idempotent)),
            "/orders"
          ]] as const
        ) {
          const { post } = yield* served(app)
          const first = yield* post(path, { key: `k${path}`, body: { sku: "A" } })
          expect(first.status).toBe(201)
          expect(JSON.parse(first.body)).toMatchObject({ sku: "A" })
          const again = yield* post(path, { key: `k${path}`, body: { sku: "A" } })
          expect(again.headers["idempotent-replayed"]).toBe("true")
        }
        expect(orders.runs()).toBe(2)
      }))
  )

  it("rejects bad options when built", () => {
    expect(() => IdempotencyMiddleware.make({ ttl: "30 seconds", lease: "60 seconds" })).toThrow(
      /longer than the lease/
    )
    expect(() => IdempotencyMiddleware.make({ maxKeyLength: 0 })).toThrow(/maxKeyLength/)
    expect(() => IdempotencyMiddleware.make({ lease: 0 })).toThrow(/lease/)
    expect(() => IdempotencyMiddleware.make({ ttl: -1 })).toThrow(/ttl/)
  })
})
