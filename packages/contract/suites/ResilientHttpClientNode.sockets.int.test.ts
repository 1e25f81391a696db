/**
 * `ResilientHttpClient/Node` over real sockets: a connection that is never made (a listener whose accept queue is
 * full) is `ConnectFailed` "timeout", never sent; a refused one `ConnectFailed` "refused"; a server that takes the
 * request but does not answer, or whose body stalls, is the attempt timeout's `NoResponse` "read-timeout": it may
 * have run; and the layer's release ends, a body nobody read included. The connect timeout is undici's, in real
 * time (its timers tick twice a second); the attempt timeout is the TestClock's. The layer's options are checked in
 * ResilientHttpClient.policies.test.ts.
 */
import {
  callback,
  failureOf,
  fork,
  forkDaemon,
  HttpClientRequest,
  isDecodeError,
  scoped,
  scopedLive,
  TestClock
} from "#edition"
import { describe, expect } from "@effect/vitest"
import { Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Queue, Schedule, Scope } from "effect"
import { HttpErrors, ResilientHttpClient } from "effect-resilience"
import type { Retry } from "effect-resilience"
import * as ResilientHttpClientNode from "effect-resilience/ResilientHttpClient/Node"
import { spawn } from "node:child_process"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { connect, createServer as createNetServer, type Socket } from "node:net"

/** Retries at once: the attempts below fail in real time, and no TestClock has to move for the next one. */
const atOnce = Schedule.map(Schedule.forever, () => Duration.zero)

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

/**
 * A listener that never accepts, in a child Node process that blocks its only thread once listening (backlog 1),
 * with its accept queue already full: on Linux the queue holds backlog + 1 connections, so once two fillers have
 * connected, the kernel answers no further handshake and a new connection can only time out.
 */
const fullListener = Effect.acquireRelease(
  callback<{ readonly port: number; readonly close: () => void }>((resume) => {
    const child = spawn(process.execPath, [
      "-e",
      "const s = require('node:net').createServer()\n" +
      "s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () =>\n" +
      "  process.stdout.write(s.address().port + '\\n', () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)))"
    ], { stdio: ["ignore", "pipe", "inherit"] })
    const fillers: Array<Socket> = []
    const close = () => {
      for (const filler of fillers) filler.destroy()
      child.kill()
    }
    child.stdout.once("data", (data) => {
      const port = Number(String(data).trim())
      let connected = 0
      for (let i = 0; i < 4; i++) {
        const filler = connect(port, "127.0.0.1")
        fillers.push(filler)
        filler.on("error", () => {})
        filler.once("connect", () => {
          if (++connected === 2) resume(Effect.succeed({ port, close }))
        })
      }
    })
    return Effect.sync(close)
  }),
  (listener) => Effect.sync(listener.close)
).pipe(Effect.map((listener) => listener.port))

const post = (port: number) => HttpClientRequest.post(`http://127.0.0.1:${port}/orders`)

/** `effect`, failing the test if it has not ended within 10 seconds (real time). */
const within = <A>(effect: Effect.Effect<A>, what: string) =>
  Effect.flatMap(
    Effect.timeoutOption(effect, "10 seconds"),
    Option.match({ onNone: () => Effect.fail(new Error(`${what} did not end within 10 s`)), onSome: Effect.succeed })
  )

/**
 * A node:http server answering `/big` with a 1 MiB body and `/endless` with a body that never ends, each written as
 * fast as the client takes it; `sending` completes once the body is being written, `closed` when the connection
 * it was written on is closed.
 */
const bodyServer = Effect.gen(function*() {
  const sending = yield* Deferred.make<void>()
  const closed = yield* Deferred.make<void>()
  const port = yield* rawServer((request, response) => {
    request.socket.once("close", () => Effect.runSync(Deferred.done(closed, Exit.void)))
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
    Effect.runSync(Deferred.done(sending, Exit.void))
  })
  return { port, sending, closed }
})

describe("ResilientHttpClient/Node over sockets", () => {
  // live: undici's connect timer runs in real time, and the attempt timeout (30 s) must not be the one to fire
  scopedLive(
    "a connect timeout is ConnectFailed \"timeout\": never sent, so even a POST without a key is retried",
    () =>
      Effect.gen(function*() {
        const port = yield* fullListener
        const http = yield* ResilientHttpClient.ResilientHttpClient
        const error = failureOf(yield* Effect.exit(http.execute(post(port)))) as Retry.RetriesExhausted<
          HttpErrors.ConnectFailed
        >
        expect(error._tag).toBe("RetriesExhausted")
        expect(error.attempts).toBe(2)
        expect(error.last).toBeInstanceOf(HttpErrors.ConnectFailed)
        expect(error.last.reason).toBe("timeout")
      }).pipe(
        Effect.provide(ResilientHttpClientNode.layer({
          connectTimeout: "200 millis",
          attemptTimeout: "30 seconds",
          retry: { schedule: atOnce, maxAttempts: 2 },
          idempotencyKeys: false
        }))
      )
  )

  scoped(
    "a refused connection is ConnectFailed \"refused\", retried like any request never sent",
    () =>
      Effect.gen(function*() {
        const port = yield* freePort
        const http = yield* ResilientHttpClient.ResilientHttpClient
        const error = failureOf(yield* Effect.exit(http.execute(post(port)))) as Retry.RetriesExhausted<
          HttpErrors.ConnectFailed
        >
        expect(error.attempts).toBe(3)
        expect(error.last).toBeInstanceOf(HttpErrors.ConnectFailed)
        expect(error.last.reason).toBe("refused")
      }).pipe(
        Effect.provide(
          ResilientHttpClientNode.layer({ retry: { schedule: atOnce, maxAttempts: 3 }, idempotencyKeys: false })
        )
      )
  )

  scoped(
    "a server that takes the POST and never answers is NoResponse \"read-timeout\": it may have run",
    () =>
      Effect.gen(function*() {
        const arrived = yield* Queue.unbounded<string>()
        const port = yield* rawServer((request) => {
          request.resume()
          request.on("end", () => Effect.runSync(Queue.offer(arrived, request.url ?? "")))
        })
        const http = yield* ResilientHttpClient.ResilientHttpClient
        const call = yield* fork(Effect.exit(http.execute(post(port))))
        expect(yield* Queue.take(arrived)).toBe("/orders")
        yield* TestClock.adjust("1 second")
        const error = failureOf(yield* Fiber.join(call))
        // not retried: without a key, a POST that may have run is not sent again
        expect(error).toBeInstanceOf(HttpErrors.NoResponse)
        expect((error as HttpErrors.NoResponse).reason).toBe("read-timeout")
        expect(yield* Queue.size(arrived)).toBe(0)
      }).pipe(
        Effect.provide(ResilientHttpClientNode.layer({
          connectTimeout: "200 millis",
          attemptTimeout: "1 second",
          retry: { schedule: atOnce, maxAttempts: 3 },
          idempotencyKeys: false
        }))
      )
  )

  scoped(
    "a 201 whose body stalls after half its bytes fails with a read timeout, never hangs",
    () =>
      Effect.gen(function*() {
        const port = yield* rawServer((_, response) => {
          response.writeHead(201, { "content-type": "application/json", "content-length": "40" })
          response.write("{\"id\":\"A-1\",\"sku\":\"BO") // 20 of 40 bytes, then nothing
        })
        const http = yield* ResilientHttpClient.ResilientHttpClient
        const headers = yield* Deferred.make<void>()
        const call = yield* post(port).pipe(
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
      }).pipe(Effect.provide(ResilientHttpClientNode.layer({ attemptTimeout: "1 second" })))
  )
})

describe("ResilientHttpClient/Node's release", () => {
  // A graceful shutdown must end: the layer's undici agent is destroyed, not closed, when the layer is released
  // (`close()` waits for every request in flight, and a body nobody reads is never done).
  for (const path of ["/big", "/endless"]) {
    scopedLive(
      `ends after a response whose body was never read (${path}), and closes its connection`,
      () =>
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
          const release = yield* forkDaemon(Scope.close(scope, Exit.void))
          yield* within(Fiber.await(release), "the layer's release")
          yield* within(Deferred.await(server.closed), "the server's seeing its connection closed")
        })
    )
  }
})
