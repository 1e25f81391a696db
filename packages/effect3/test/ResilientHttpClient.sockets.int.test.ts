/**
 * The client over real sockets, where sockets are the point: connection pools, connect timeouts, bodies that
 * stall on the wire, and one Idempotency-Key per logical request against the real orders service.
 */
import { HttpClient, HttpClientRequest, HttpRouter, HttpServer, HttpServerResponse } from "@effect/platform"
import { NodeHttpClient, NodeHttpServer, Undici } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import {
  Cause,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Queue,
  Schedule,
  Scope,
  TestClock
} from "effect"
import { spawn } from "node:child_process"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { connect, createServer as createNetServer } from "node:net"
import { Hedge, HttpErrors, IdempotencyStore, RateLimiterStore, ResilientHttpClient, Retry } from "../src/index.js"
import * as ResilientHttpClientNode from "../src/ResilientHttpClient/Node.js"
import { serve, ServerAndClient } from "./support/httpServer.js"
import { tappedOrders } from "./support/orders.js"

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

const portOf = Effect.map(HttpServer.HttpServer, (s) => s.address._tag === "TcpAddress" ? s.address.port : 0)

describe("ResilientHttpClient over sockets", () => {
  it.scoped(
    "a retried response's body is let go, so many retried 503s through a one-connection pool never stall",
    () =>
      Effect.gen(function*() {
        const big = "x".repeat(256 * 1024) // more than the socket buffers: unread, it holds its connection
        yield* serve(HttpRouter.empty.pipe(
          HttpRouter.get("/big", HttpServerResponse.text(big, { status: 503 })),
          HttpRouter.get("/small", HttpServerResponse.text("try again later", { status: 503 }))
        ))
        const port = yield* portOf
        const agent = yield* Effect.acquireRelease(
          Effect.sync(() => new Undici.Agent({ connections: 1 })),
          (a) => Effect.promise(() => a.destroy())
        )
        const zero = Schedule.forever.pipe(Schedule.as(Duration.zero))
        const http = yield* ResilientHttpClient.make({ retry: { schedule: zero, maxAttempts: 3 } }).pipe(
          Effect.provideService(HttpClient.HttpClient, NodeHttpClient.makeUndici(agent))
        )
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
      }).pipe(Effect.provide(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }))),
    30_000
  )

  it.scoped("a connection refused is ConnectFailed: never left, so even a POST without a key is retried", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const http = yield* ResilientHttpClient.make({ retry: { maxAttempts: 3 }, idempotencyKeys: false })
      const call = yield* Effect.fork(Effect.exit(http.execute(HttpClientRequest.post(`http://127.0.0.1:${port}/x`))))
      yield* TestClock.adjust("1 minute")
      const error = failureOf(yield* Fiber.join(call)) as Retry.RetriesExhausted<HttpErrors.ConnectFailed>
      expect(error.attempts).toBe(3)
      expect(error.last).toBeInstanceOf(HttpErrors.ConnectFailed)
      expect(error.last.reason).toBe("refused")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.live("Node: a connect timeout is its own error, classified as not sent", () =>
    Effect.gen(function*() {
      // a listener that never accepts: once its backlog is full, new connections cannot be made
      const port = yield* stalledListener
      const http = yield* ResilientHttpClient.ResilientHttpClient
      const error = failureOf(yield* Effect.exit(http.execute(HttpClientRequest.post(`http://127.0.0.1:${port}/`))))
      expect(error).toBeInstanceOf(HttpErrors.ConnectFailed)
      expect((error as HttpErrors.ConnectFailed).reason).toBe("timeout")
    }).pipe(
      Effect.provide(
        ResilientHttpClientNode.layer({ connectTimeout: "200 millis", retry: false, idempotencyKeys: false })
      ),
      Effect.scoped
    ), 20_000)

  describe("the Node layer's release", () => {
    // A graceful shutdown must end: the layer's undici agent is destroyed, not closed, when the layer is released
    // (`close()` waits for every request in flight, and a body nobody reads is never done).
    for (const path of ["/big", "/endless"]) {
      it.scopedLive(`ends after a response whose body was never read (${path}), and closes its connection`, () =>
        Effect.gen(function*() {
          const server = yield* bodyServer
          const scope = yield* Scope.make()
          const context = yield* Layer.buildWithScope(ResilientHttpClientNode.layer({ retry: false }), scope)
          const http = Context.get(context, ResilientHttpClient.ResilientHttpClient)
          const status = yield* Effect.scoped(
            Effect.map(http.get(`http://127.0.0.1:${server.port}${path}`), (response) => response.status)
          )
          expect(status).toBe(200)
          yield* Deferred.await(server.sending) // the server is writing the body nobody reads
          // the release in a fiber of its own: a finalizer cannot be interrupted, so a release that hangs would
          // hang a timeout around it too; the wait for it is bounded instead
          const release = yield* Effect.forkDaemon(Scope.close(scope, Exit.void))
          yield* within(Fiber.await(release), "the layer's release")
          yield* within(Deferred.await(server.closed), "the server's seeing its connection closed")
        }))
    }
  })

  describe("reading the body is inside the attempt timeout", () => {
    const bodyRead = (write: (response: ServerResponse) => void) =>
      Effect.gen(function*() {
        const server = yield* rawServer(write)
        const http = yield* ResilientHttpClient.make({ attemptTimeout: "1 second" })
        const headers = yield* Deferred.make<void>()
        const call = yield* HttpClientRequest.get(`http://127.0.0.1:${server}/`).pipe(
          http.execute,
          Effect.tap(() => Deferred.succeed(headers, undefined)),
          Effect.flatMap((response) => response.text), // starts at once, before this fiber waits
          Effect.exit,
          Effect.fork
        )
        yield* Deferred.await(headers)
        yield* TestClock.adjust("1 second")
        const error = failureOf(yield* Fiber.join(call))
        expect(error?._tag).toBe("ResponseError")
        const cause = (error as { cause?: unknown }).cause as HttpErrors.NoResponse
        expect(cause).toBeInstanceOf(HttpErrors.NoResponse)
        expect(cause.reason).toBe("read-timeout")
      }).pipe(Effect.provide(NodeHttpClient.layerUndici))

    it.scoped("a 201 whose body stalls after half its bytes fails with a read timeout, never hangs", () =>
      bodyRead((response) => {
        response.writeHead(201, { "content-type": "application/json", "content-length": "40" })
        response.write("{\"id\":\"A-1\",\"sku\":\"BO") // 20 of 40 bytes, then nothing
      }))

    it.scoped("a slowly trickled 200 body is cut at the attempt's end", () =>
      bodyRead((response) => {
        response.writeHead(200, { "content-type": "text/plain", "content-length": "10000" })
        const timer = setInterval(() => response.write("x"), 20) // real time: 200 s for the whole body
        response.on("close", () => clearInterval(timer))
      }))
  })

  describe("one Idempotency-Key per logical request, against the orders service", () => {
    /** The orders service on a real socket. */
    const orders = Effect.gen(function*() {
      const service = yield* tappedOrders
      yield* serve(service.app)
      return { ...service, order: service.order(`http://127.0.0.1:${yield* portOf}`) }
    })

    it.scoped("three hedged copies of one POST carry one key: one order", () =>
      Effect.gen(function*() {
        const { arrivals, created, order } = yield* orders
        const http = yield* ResilientHttpClient.make({ attemptTimeout: "10 seconds" })
        const slow = HttpClientRequest.setUrlParam(order, "delayMs", "1000")
        const call = yield* Effect.fork(
          http.execute(slow).pipe(Hedge.hedge({ delay: "100 millis", maxAttempts: 3 }), Effect.map((r) => r.status))
        )
        const keys = [yield* Queue.take(arrivals)]
        yield* TestClock.adjust("100 millis")
        keys.push(yield* Queue.take(arrivals))
        yield* TestClock.adjust("100 millis")
        keys.push(yield* Queue.take(arrivals))
        yield* TestClock.adjust("5 seconds")
        expect(yield* Fiber.join(call)).toBe(201)
        expect(new Set(keys).size).toBe(1)
        expect(keys[0]).toBeDefined()
        expect(created()).toHaveLength(1)
      }).pipe(Effect.provide(services)))

    it.scoped("Effect.retry around execute runs the same request value again: the same key, one order", () =>
      Effect.gen(function*() {
        const { arrivals, created, order } = yield* orders
        // each execution gives up at 500 ms while the order commits and answers only after 1 s
        const http = yield* ResilientHttpClient.make({ attemptTimeout: "500 millis", retry: { maxAttempts: 1 } })
        const late = HttpClientRequest.setUrlParam(order, "afterCommitMs", "1000")
        const call = yield* Effect.fork(Effect.exit(http.execute(late).pipe(Effect.retry(Schedule.recurs(2)))))
        const keys = [yield* Queue.take(arrivals)]
        for (let i = 0; i < 2; i++) {
          yield* TestClock.adjust("500 millis")
          keys.push(yield* Queue.take(arrivals))
        }
        yield* TestClock.adjust("5 seconds")
        yield* Fiber.join(call)
        expect(new Set(keys).size).toBe(1)
        expect(created()).toHaveLength(1)
      }).pipe(Effect.provide(services)))
  })
})

const services = Layer.mergeAll(ServerAndClient, IdempotencyStore.layerMemory, RateLimiterStore.layerMemory)

/** A plain node:http server whose every response is written by `write`, for bodies no framework would send. */
const rawServer = (write: (response: ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.async<Server>((resume) => {
      const server = createServer((_, response) => write(response))
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.sync(() => server.close()).pipe(Effect.zipRight(Effect.sync(() => server.closeAllConnections())))
  ).pipe(Effect.map((server) => {
    const address = server.address()
    return typeof address === "object" && address !== null ? address.port : 0
  }))

/** `effect`, failing the test if it has not ended within 10 seconds (real time). */
const within = <A>(effect: Effect.Effect<A>, what: string) =>
  Effect.timeoutFail(effect, { duration: "10 seconds", onTimeout: () => new Error(`${what} did not end within 10 s`) })

/**
 * A node:http server answering `/big` with a 1 MiB body and `/endless` with a body that never ends, each written as
 * fast as the client takes it; `sending` completes once the body is being written, `closed` when the connection
 * it was written on is closed.
 */
const bodyServer = Effect.gen(function*() {
  const sending = yield* Deferred.make<void>()
  const closed = yield* Deferred.make<void>()
  const server = yield* Effect.acquireRelease(
    Effect.async<Server>((resume) => {
      const server = createServer((request: IncomingMessage, response: ServerResponse) => {
        request.socket.once("close", () => Deferred.unsafeDone(closed, Exit.void))
        const chunk = Buffer.alloc(64 * 1024, "x")
        if (request.url === "/big") {
          response.writeHead(200, { "content-type": "text/plain", "content-length": String(1024 * 1024) })
          for (let i = 0; i < 16; i++) response.write(chunk)
          response.end()
        } else {
          response.writeHead(200, { "content-type": "text/plain" })
          const pump = () => {
            while (response.write(chunk)) {
              // until the socket's buffer is full; then on "drain"
            }
          }
          response.on("drain", pump)
          pump()
        }
        Deferred.unsafeDone(sending, Exit.void)
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.sync(() => server.close()).pipe(Effect.zipRight(Effect.sync(() => server.closeAllConnections())))
  )
  const address = server.address()
  return { port: typeof address === "object" && address !== null ? address.port : 0, sending, closed }
})

const freePort = Effect.async<number>((resume) => {
  const server = createNetServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** A TCP listener (in a python3 child, which can listen without accepting) whose backlog is already full. */
const stalledListener = Effect.acquireRelease(
  Effect.async<{ readonly port: number; readonly close: () => void }>((resume) => {
    const child = spawn("python3", [
      "-c",
      "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\ntime.sleep(60)"
    ])
    child.stdout.once("data", (data) => {
      const port = Number(String(data).trim())
      const fillers = Array.from({ length: 4 }, () => connect(port, "127.0.0.1"))
      const close = () => {
        fillers.forEach((s) => s.destroy())
        child.kill()
      }
      // one filler accepted into the queue (backlog 0) fills it: later handshakes go unanswered
      let ready = false
      for (const filler of fillers) {
        filler.on("error", () => {})
        filler.once("connect", () => {
          if (ready) return
          ready = true
          resume(Effect.succeed({ port, close }))
        })
      }
    })
  }),
  (listener) => Effect.sync(listener.close)
).pipe(Effect.map((l) => l.port))
