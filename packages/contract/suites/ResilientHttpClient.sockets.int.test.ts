/**
 * The client over real sockets, where sockets are the point: a one-connection pool that retried answers must not
 * hold, bodies that stall or trickle on the wire, and one Idempotency-Key per logical request when hedged copies
 * race on real connections or the caller's own retry sends a request again to the real IdempotencyMiddleware. The
 * transport is Effect's `FetchHttpClient` (Node's own fetch), or undici's where the pool is the point; the servers
 * are plain `node:http` (every byte is what the test wrote) or the edition's `NodeHttpServer`, whose handlers share
 * the test's TestClock. The `ResilientHttpClient/Node` layer: ResilientHttpClientNode.sockets.int.test.ts.
 */
import {
  bodyJson,
  callback,
  failureOf,
  FetchHttpClient,
  fork,
  HttpClientRequest,
  HttpServerRequest,
  HttpServerResponse,
  isDecodeError,
  jsonResponse,
  scoped,
  serveNode,
  TestClock,
  undiciLayer
} from "#edition"
import { describe, expect } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer, Queue, Schedule } from "effect"
import { Hedge, HttpErrors, IdempotencyMiddleware, IdempotencyStore, ResilientHttpClient } from "effect-resilience"
import type { Retry } from "effect-resilience"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { createServer as createNetServer } from "node:net"

/** A plain node:http server on 127.0.0.1 for the rest of the scope; `handle` writes every response. */
const rawServer = (handle: (request: IncomingMessage, response: ServerResponse) => void) =>
  Effect.acquireRelease(
    callback<Server>((resume) => {
      const server = createServer(handle)
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) =>
      Effect.sync(() => {
        server.closeAllConnections()
        server.close()
      })
  ).pipe(Effect.map((server) => {
    const address = server.address()
    return typeof address === "object" && address !== null ? address.port : 0
  }))

/** A port nothing listens on (it was free a moment ago). */
const freePort = callback<number>((resume) => {
  const server = createNetServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

describe("ResilientHttpClient over sockets", () => {
  scoped(
    "a retried response's body is let go, so many retried 503s through a one-connection pool never stall",
    () =>
      Effect.gen(function*() {
        const big = "x".repeat(256 * 1024) // more than the socket buffers: unread, it holds its connection
        const port = yield* serveNode(Effect.map(
          HttpServerRequest.HttpServerRequest,
          (request) => HttpServerResponse.text(request.url.endsWith("/big") ? big : "try again later", { status: 503 })
        ))
        const atOnce = Schedule.map(Schedule.forever, () => Duration.zero)
        const http = yield* ResilientHttpClient.make({ retry: { schedule: atOnce, maxAttempts: 3 } })
        for (let i = 0; i < 10; i++) {
          for (const path of ["big", "small"]) {
            const error = failureOf(
              yield* Effect.exit(http.execute(HttpClientRequest.get(`http://127.0.0.1:${port}/${path}`)))
            )
            const last = (error as Retry.RetriesExhausted<HttpErrors.StatusError>).last
            expect(last.status).toBe(503)
            // the caller can still read the body, up to 64 KiB of it
            expect(yield* last.response.text).toBe(path === "big" ? big.slice(0, 64 * 1024) : "try again later")
          }
        }
      }).pipe(Effect.provide(undiciLayer({ connections: 1 }))),
    30_000
  )

  scoped(
    "a connection refused is ConnectFailed through fetch's causes: even a POST without a key is retried",
    () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const http = yield* ResilientHttpClient.make({ retry: { maxAttempts: 3 }, idempotencyKeys: false })
        let done = false
        const call = yield* fork(
          Effect.exit(http.execute(HttpClientRequest.post(`http://127.0.0.1:${port}/x`))).pipe(
            Effect.ensuring(Effect.sync(() => (done = true)))
          )
        )
        // each attempt fails on the wire, then sleeps its backoff on the TestClock: move it until the call ends
        while (!done) {
          yield* TestClock.adjust("1 second")
          yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
        }
        const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<HttpErrors.ConnectFailed>
        expect(error.attempts).toBe(3)
        expect(error.last).toBeInstanceOf(HttpErrors.ConnectFailed)
        expect(error.last.reason).toBe("refused")
      }).pipe(Effect.provide(FetchHttpClient.layer))
  )

  describe("reading the body is inside the attempt timeout", () => {
    const bodyRead = (write: (response: ServerResponse) => void) =>
      Effect.gen(function*() {
        const port = yield* rawServer((_, response) => write(response))
        const http = yield* ResilientHttpClient.make({ attemptTimeout: "1 second" })
        const headers = yield* Deferred.make<void>()
        const call = yield* HttpClientRequest.get(`http://127.0.0.1:${port}/`).pipe(
          http.execute,
          Effect.tap(() => Deferred.succeed(headers, undefined)),
          Effect.flatMap((response) => response.text), // starts at once, before this fiber waits
          Effect.exit,
          fork
        )
        yield* Deferred.await(headers)
        yield* TestClock.adjust("1 second")
        const error = failureOf(yield* Fiber.join(call))
        expect(isDecodeError(error)).toBe(true)
        const cause = (error as { cause?: unknown }).cause as HttpErrors.NoResponse
        expect(cause).toBeInstanceOf(HttpErrors.NoResponse)
        expect(cause.reason).toBe("read-timeout")
      }).pipe(Effect.provide(FetchHttpClient.layer))

    scoped(
      "a 201 whose body stalls after half its bytes fails with a read timeout, never hangs",
      () =>
        bodyRead((response) => {
          response.writeHead(201, { "content-type": "application/json", "content-length": "40" })
          response.write("{\"id\":\"A-1\",\"sku\":\"BO") // 20 of 40 bytes, then nothing
        })
    )

    scoped("a slowly trickled 200 body is cut at the attempt's end", () =>
      bodyRead((response) => {
        response.writeHead(200, { "content-type": "text/plain", "content-length": "10000" })
        const timer = setInterval(() => response.write("x"), 20) // real time: 200 s for the whole body
        response.on("close", () => clearInterval(timer))
      }))
  })

  scoped("three hedged copies of one POST on three connections carry one key", () =>
    Effect.gen(function*() {
      // the server holds every answer until the third copy has arrived, then answers them all
      const arrivals = yield* Queue.unbounded<string | undefined>()
      const held: Array<ServerResponse> = []
      const port = yield* rawServer((request, response) => {
        request.resume()
        request.on("end", () => {
          Effect.runSync(Queue.offer(arrivals, request.headers["idempotency-key"] as string | undefined))
          held.push(response)
          if (held.length === 3) { for (const r of held) r.writeHead(201).end("{}") }
        })
      })
      const http = yield* ResilientHttpClient.make({ attemptTimeout: "10 seconds" })
      const order = HttpClientRequest.post(`http://127.0.0.1:${port}/orders`).pipe(bodyJson({ sku: "BOOK-1" }))
      const call = yield* fork(
        http.execute(order).pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 }), Effect.map((r) => r.status))
      )
      const keys = [yield* Queue.take(arrivals)]
      yield* TestClock.adjust("100 millis")
      keys.push(yield* Queue.take(arrivals))
      yield* TestClock.adjust("100 millis")
      keys.push(yield* Queue.take(arrivals))
      expect(yield* Fiber.join(call)).toBe(201)
      expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/)
      expect(new Set(keys).size).toBe(1)
    }).pipe(Effect.provide(FetchHttpClient.layer)))

  describe("one Idempotency-Key per logical request, against the real IdempotencyMiddleware", () => {
    /**
     * An orders handler behind the middleware (memory store) on a real socket, that commits at once and answers
     * only after 1 s; `arrivals` has the key of every request the server received.
     */
    const orders = Effect.gen(function*() {
      const arrivals = yield* Queue.unbounded<string | undefined>()
      let created = 0
      const handler = Effect.gen(function*() {
        const id = ++created
        yield* Effect.sleep("1 second")
        return jsonResponse({ id }, { status: 201 })
      })
      const idempotent = yield* IdempotencyMiddleware.make()
      const port = yield* serveNode(Effect.flatMap(
        HttpServerRequest.HttpServerRequest,
        (request) => Effect.andThen(Queue.offer(arrivals, request.headers["idempotency-key"]), idempotent(handler))
      ))
      const order = HttpClientRequest.post(`http://127.0.0.1:${port}/orders`).pipe(bodyJson({ sku: "BOOK-1" }))
      return { arrivals, created: () => created, order }
    })
    const services = Layer.merge(FetchHttpClient.layer, IdempotencyStore.layerMemory)

    scoped("three hedged copies of one POST carry one key: one order", () =>
      Effect.gen(function*() {
        const { arrivals, created, order } = yield* orders
        const http = yield* ResilientHttpClient.make({ attemptTimeout: "10 seconds" })
        const call = yield* fork(
          http.execute(order).pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 }), Effect.map((r) => r.status))
        )
        const keys = [yield* Queue.take(arrivals)]
        yield* TestClock.adjust("100 millis")
        keys.push(yield* Queue.take(arrivals))
        yield* TestClock.adjust("100 millis")
        keys.push(yield* Queue.take(arrivals))
        yield* TestClock.adjust("5 seconds")
        expect(yield* Fiber.join(call)).toBe(201)
        expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/)
        expect(new Set(keys).size).toBe(1)
        expect(created()).toBe(1)
      }).pipe(Effect.provide(services)))

    scoped(
      "Effect.retry around execute runs the same request value again: the same key, one order",
      () =>
        Effect.gen(function*() {
          const { arrivals, created, order } = yield* orders
          // each execution gives up at 500 ms, before the answer
          const http = yield* ResilientHttpClient.make({ attemptTimeout: "500 millis", retry: { maxAttempts: 1 } })
          const call = yield* fork(Effect.exit(http.execute(order).pipe(Effect.retry(Schedule.recurs(2)))))
          const keys = [yield* Queue.take(arrivals)]
          for (let i = 0; i < 2; i++) {
            yield* TestClock.adjust("500 millis")
            keys.push(yield* Queue.take(arrivals))
          }
          yield* TestClock.adjust("5 seconds")
          yield* Fiber.join(call)
          expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/)
          expect(new Set(keys).size).toBe(1)
          expect(created()).toBe(1)
        }).pipe(Effect.provide(services))
    )
  })
})
