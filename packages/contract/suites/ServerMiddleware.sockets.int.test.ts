import {
  edition,
  eventually,
  fork,
  HttpServerRequest,
  HttpServerResponse,
  jsonResponse,
  recordingSleeps,
  scoped,
  scopedLive,
  serveNode as serve,
  TestClock,
  untilSleeping
} from "#edition"
import { describe, expect } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber, Layer, Queue } from "effect"
import {
  AdaptiveLimiter,
  IdempotencyMiddleware,
  IdempotencyStore,
  LoadShedMiddleware,
  RateLimiter,
  RateLimiterStore,
  RateLimitMiddleware
} from "effect-resilience"
import * as Chaos from "effect-resilience/Chaos"
import { getFrom, ioTurn, rawClient, send } from "./support/sockets.js"

// The middlewares over real sockets, served by each edition's NodeHttpServer, where the sockets are the point. Its
// handlers run with the services of the fiber that serves: the test's TestClock included.

/**
 * Counts the requests whose fiber the server interrupted before their answer was written: what NodeHttpServer does
 * when the client closes its connection.
 */
const countingAborts = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) => {
  let aborted = 0
  return { app: Effect.onInterrupt(app, () => Effect.sync(() => aborted++)), aborted: () => aborted }
}

// a fixed limit, so the test decides when the server is full
const fixed = (limit: number) => ({ algorithm: AdaptiveLimiter.aimd(), minLimit: limit, maxLimit: limit })

describe("the middlewares over sockets", () => {
  scoped(
    "LoadShed: a client that sends its body slowly gets 408 after bodyTimeout, holding no slot",
    () =>
      recordingSleeps(Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make({ limiter: fixed(1), trustCritical: true })
        let ran = 0
        const port = yield* serve(
          shed(
            Effect.flatMap(
              HttpServerRequest.HttpServerRequest,
              (request) =>
                Effect.map(Effect.orDie(request.text), (text) => {
                  ran++
                  return HttpServerResponse.text(`read ${text.length}`)
                })
            )
          )
        )
        const now = yield* Clock.currentTimeMillis
        // 10 of the 100 bytes it announces, and then nothing
        const slow = rawClient(
          port,
          "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nRequest-Criticality: critical\r\n\r\n0123456789"
        )
        yield* untilSleeping(now + 5000) // the server reads its body, under the body timeout
        // the only slot is free for a client that sent its body
        const ready = yield* send(port, "/upload", { body: "abc", headers: { "request-criticality": "critical" } })
        expect(ready.status).toBe(200)
        expect(ready.body).toBe("read 3")
        yield* TestClock.adjust("5 seconds")
        const reply = yield* slow.reply // the server closed the connection after its answer
        expect(reply).toMatch(/^HTTP\/1\.1 408 /)
        expect(reply.toLowerCase()).toContain("connection: close")
        expect(reply).toContain("application/problem+json")
        expect(ran).toBe(1)
      }))
  )

  scoped(
    "Idempotency: a client that leaves does not stop its handler; the retry gets the stored answer",
    () =>
      Effect.gen(function*() {
        const entered = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        let runs = 0
        const idempotent = yield* IdempotencyMiddleware.make()
        const handler = Effect.suspend(() => {
          const n = ++runs
          return Deferred.succeed(entered, undefined).pipe(
            Effect.andThen(Deferred.await(gate)),
            Effect.as(jsonResponse({ id: n }, { status: 201 }))
          )
        })
        const { aborted, app } = countingAborts(handler.pipe(idempotent))
        const port = yield* serve(app)
        const body = "{\"sku\":\"A\"}"
        const leaving = rawClient(
          port,
          // another Host than the retry's (fetch sends 127.0.0.1:port): the fingerprint covers the path, not the host
          `POST /orders HTTP/1.1\r\nHost: localhost\r\nIdempotency-Key: leaves\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${body.length}\r\n\r\n${body}`
        )
        yield* Deferred.await(entered)
        yield* leaving.leave // the connection closes: the server interrupts the request's fiber (only its wait ends)
        while (aborted() === 0) yield* ioTurn
        yield* Deferred.succeed(gate, undefined)
        // the handler, detached from the request, ends and its answer is stored: the retry is answered from it (a
        // handler interrupted with its client would have left the key in progress, and the retry would get 409)
        let retry = yield* send(port, "/orders", { body, headers: { "idempotency-key": "leaves" } })
        for (let i = 0; i < 100 && retry.status === 409; i++) {
          yield* ioTurn
          retry = yield* send(port, "/orders", { body, headers: { "idempotency-key": "leaves" } })
        }
        expect(retry.status).toBe(201)
        expect(retry.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
        expect(JSON.parse(retry.body)).toEqual({ id: 1 })
        expect(runs).toBe(1)
      }).pipe(Effect.provide(Layer.mergeAll(IdempotencyStore.layerMemory)))
  )

  scoped(
    "Idempotency: a concurrent duplicate over another connection gets 409 with Retry-After",
    () =>
      Effect.gen(function*() {
        const entered = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        let runs = 0
        const idempotent = yield* IdempotencyMiddleware.make()
        const handler = Effect.suspend(() => {
          const n = ++runs
          return Deferred.succeed(entered, undefined).pipe(
            Effect.andThen(Deferred.await(gate)),
            Effect.as(jsonResponse({ id: n }, { status: 201 }))
          )
        })
        const port = yield* serve(handler.pipe(idempotent))
        const headers = { "idempotency-key": "dup" }
        const first = yield* fork(send(port, "/orders", { headers }))
        yield* Deferred.await(entered)
        const duplicate = yield* send(port, "/orders", { headers })
        expect(duplicate.status).toBe(409)
        expect(duplicate.headers["retry-after"]).toBe("1")
        expect(duplicate.headers["content-type"]).toBe("application/problem+json")
        yield* Deferred.succeed(gate, undefined)
        const created = yield* Fiber.join(first)
        expect(created.status).toBe(201)
        expect(JSON.parse(created.body)).toEqual({ id: 1 })
        expect(runs).toBe(1)
      }).pipe(Effect.provide(IdempotencyStore.layerMemory))
  )

  scoped(
    "Idempotency: the request line's target is fingerprinted as sent, whatever the Host header says",
    () =>
      Effect.gen(function*() {
        let runs = 0
        // every target answered, no router in between: the middleware alone decides
        const handler = Effect.sync(() => HttpServerResponse.text(`run ${++runs}`, { status: 201 }))
        const port = yield* serve(handler.pipe(yield* IdempotencyMiddleware.make()))
        // raw bytes: an HTTP client would drop the fragment, and refuses a malformed Host
        const sent = (target: string, host = "127.0.0.1") =>
          rawClient(
            port,
            `POST ${target} HTTP/1.1\r\nHost: ${host}\r\nIdempotency-Key: target\r\nContent-Type: application/json\r\n` +
              "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
          ).reply
        expect(yield* sent("/orders")).toMatch(/^HTTP\/1\.1 201 /)
        // another target, as the client wrote it
        for (const target of ["/orders?", "/orders#frag", "/orders/"]) {
          expect(yield* sent(target), target).toMatch(/^HTTP\/1\.1 422 /)
        }
        // the same target, whatever the Host, or an authority in the target itself
        for (
          const [target, host] of [
            ["/orders", "a/b"],
            ["/orders", "[::1"],
            ["/orders", "elsewhere.example:8080"],
            ["http://elsewhere.example:8080/orders", "127.0.0.1"]
          ] as const
        ) {
          const reply = yield* sent(target, host)
          expect(reply, `${target} with Host ${host}`).toMatch(/^HTTP\/1\.1 201 /)
          expect(reply.toLowerCase()).toContain("idempotent-replayed: true")
        }
        expect(runs).toBe(1)
      }).pipe(Effect.provide(IdempotencyStore.layerMemory))
  )

  for (const read of ["text", "arrayBuffer"] as const) {
    scoped(
      `Idempotency: behind a middleware that read the body (${read}), the bytes sent are fingerprinted, or none`,
      () =>
        Effect.gen(function*() {
          let runs = 0
          // the handler answers the bytes it was given, in hex
          const handler = Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) =>
              Effect.map(Effect.orDie(request.arrayBuffer), (bytes) => {
                runs++
                return HttpServerResponse.text(Buffer.from(bytes).toString("hex"), { status: 201 })
              })
          )
          // a logger, an HMAC check: outside, it reads the body first
          const readFirst = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
            Effect.flatMap(
              HttpServerRequest.HttpServerRequest,
              (request) =>
                Effect.andThen(
                  Effect.orDie(read === "text" ? Effect.asVoid(request.text) : Effect.asVoid(request.arrayBuffer)),
                  app
                )
            )
          const port = yield* serve(readFirst(handler.pipe(yield* IdempotencyMiddleware.make())))
          const sent = (key: string, hex: string) =>
            rawClient(
              port,
              `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/octet-stream\r\n` +
                `Content-Length: ${hex.length / 2}\r\nConnection: close\r\n\r\n${
                  Buffer.from(hex, "hex").toString("latin1")
                }`
            ).reply
          const bodyOf = (reply: string) => reply.slice(reply.indexOf("\r\n\r\n") + 4)
          const utf8Body = Buffer.from("\uFEFF{\"sku\":\"caf\u00e9\"}", "utf8").toString("hex")
          const consumed = (reply: string) => {
            expect(reply).toMatch(/^HTTP\/1\.1 500 /)
            expect(reply).toContain("body-consumed")
          }
          if (edition === "effect3") {
            // Effect 3's Node request (@effect/platform-node) keeps the text it decoded, never the bytes: its
            // `arrayBuffer` reads the spent stream again. Only a text that gives the bytes back is left (valid UTF-8,
            // its byte order mark kept); otherwise 500, never other bytes fingerprinted or handled
            if (read === "arrayBuffer") {
              for (const hex of ["ff01", utf8Body]) consumed(yield* sent(`gone-${hex}`, hex))
              expect(runs).toBe(0)
            } else {
              consumed(yield* sent("binary", "ff01"))
              expect(bodyOf(yield* sent("utf8", utf8Body))).toBe(utf8Body)
              expect(runs).toBe(1)
            }
            return
          }
          // ff01 and fe01 decode to the same text ("\uFFFD\u0001"): the bytes tell them apart
          const first = yield* sent("binary", "ff01")
          expect(first).toMatch(/^HTTP\/1\.1 201 /)
          expect(bodyOf(first)).toBe("ff01") // the handler got the bytes sent
          expect(yield* sent("binary", "fe01")).toMatch(/^HTTP\/1\.1 422 /)
          expect((yield* sent("binary", "ff01")).toLowerCase()).toContain("idempotent-replayed: true")
          expect(bodyOf(yield* sent("utf8", utf8Body))).toBe(utf8Body)
          expect(runs).toBe(2)
        }).pipe(Effect.provide(IdempotencyStore.layerMemory))
    )
  }

  scoped(
    "Idempotency: a body read before, on a request copied since (a mount, xForwardedHeaders): 500, no bytes",
    () =>
      Effect.gen(function*() {
        let runs = 0
        const handler = Effect.sync(() => HttpServerResponse.text(`run ${++runs}`, { status: 201 }))
        // outside, a middleware reads the body; between it and ours, one copies the request (`request.modify`, as a
        // router's prefix or HttpMiddleware.xForwardedHeaders do): the copy starts without the cached bytes
        const readFirst = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
          Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) => Effect.andThen(Effect.orDie(request.text), app)
          )
        const copied = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
          Effect.updateService(
            app,
            HttpServerRequest.HttpServerRequest,
            (request) => request.modify({ url: request.url })
          )
        const port = yield* serve(readFirst(copied(handler.pipe(yield* IdempotencyMiddleware.make()))))
        const sent = (key: string, body: string, length = body.length) =>
          rawClient(
            port,
            `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/json\r\n` +
              `Content-Length: ${length}\r\nConnection: close\r\n\r\n${body}`
          ).reply
        // the bytes are gone: never fingerprinted (or handled) as an empty body
        for (const body of ["{\"qty\":1}", "{\"qty\":9}"]) {
          const reply = yield* sent("copied", body)
          expect(reply, body).toMatch(/^HTTP\/1\.1 500 /)
          expect(reply).toContain("body-consumed")
        }
        // a request that declares no body has none to lose
        expect(yield* sent("empty", "", 0)).toMatch(/^HTTP\/1\.1 201 /)
        expect(runs).toBe(1)
      }).pipe(Effect.provide(IdempotencyStore.layerMemory))
  )

  scopedLive(
    "LoadShed: idle uploads hold no slot: others are served, and the idle ones get 408 problem+json",
    () =>
      Effect.gen(function*() {
        // examples/orders.ts in small: 4 orders at a time, 20 ms each, the others waiting in line for a permit
        const permits = yield* Queue.bounded<void>(4)
        yield* Effect.forEach([1, 2, 3, 4], () => Queue.offer(permits, undefined))
        const create = Effect.acquireUseRelease(
          Queue.take(permits),
          () => Effect.as(Effect.sleep("20 millis"), HttpServerResponse.text("created", { status: 201 })),
          () => Queue.offer(permits, undefined)
        )
        const shed = yield* LoadShedMiddleware.make() // the defaults: bodyTimeout 5 s
        const idempotent = yield* IdempotencyMiddleware.make()
        let entered = 0
        const counted = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
          Effect.andThen(Effect.sync(() => entered++), app)
        const port = yield* serve(counted(shed(idempotent(create))))
        // the headers of a POST and the first byte of its body, and no more
        const idle = Array.from({ length: 8 }, (_, i) =>
          rawClient(
            port,
            "POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
              `Content-Length: 20\r\nIdempotency-Key: idle-${i}\r\n\r\n{`
          ))
        yield* Effect.addFinalizer(() => Effect.forEach(idle, (upload) => upload.leave))
        // the server has their headers: their requests are in the middleware
        yield* eventually(Effect.sync(() => entered === 8))

        // another client's orders, one after another, are all served while the uploads stall
        const statuses: Array<number> = []
        for (let i = 0; i < 20; i++) {
          const body = JSON.stringify({ i })
          statuses.push((yield* send(port, "/orders", { body, headers: { "idempotency-key": `other-${i}` } })).status)
        }
        expect(statuses).toEqual(Array.from({ length: 20 }, () => 201))
        expect(idle.every((upload) => upload.state.received === "")).toBe(true)

        // the idle ones are answered once their bodies are overdue, and their connections closed
        yield* eventually(Effect.sync(() => idle.every((upload) => upload.state.closed)), { every: "50 millis" })
        for (const upload of idle) {
          const [head, body] = upload.state.received.split("\r\n\r\n")
          expect(head).toMatch(/^HTTP\/1\.1 408 /)
          expect(head!.toLowerCase()).toContain("content-type: application/problem+json")
          expect(head!.toLowerCase()).toContain("connection: close")
          expect(JSON.parse(body!)).toMatchObject({ status: 408, title: "Request Timeout" })
        }
      }).pipe(Effect.provide(IdempotencyStore.layerMemory))
  )

  scoped(
    "Chaos: a lost response after the handler committed: the client sees its connection closed",
    () =>
      Effect.gen(function*() {
        let runs = 0
        const app = Effect.sync(() => HttpServerResponse.text(`ok ${++runs}`)).pipe(
          Chaos.middleware({ lostResponse: { probability: 1 } })
        )
        const port = yield* serve(app)
        const reply = yield* rawClient(port, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").reply
        expect(reply).toBe("") // no answer: the socket was destroyed
        expect(runs).toBe(1) // the work happened; only the answer was lost
      })
  )

  scoped(
    "RateLimit: each client is limited by its connection's address; headers it chooses change nothing",
    () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 0.001 })
        const port = yield* serve(
          Effect.succeed(HttpServerResponse.text("hello")).pipe(RateLimitMiddleware.make({ limiter }))
        )
        // rotating X-Api-Key values do not make new clients of one connection's address
        const statuses: Array<number> = []
        for (let i = 0; i < 4; i++) {
          statuses.push((yield* getFrom(port, "/", "127.0.0.1", { "x-api-key": `k${i}` })).status)
        }
        expect(statuses).toEqual([200, 200, 429, 429])
        // another address has its own quota, and cannot drain this one's by naming it
        const spoof = { "x-api-key": "127.0.0.1", "x-forwarded-for": "127.0.0.1" }
        expect((yield* getFrom(port, "/", "127.0.0.3", spoof)).status).toBe(200)
        expect((yield* getFrom(port, "/", "127.0.0.3", spoof)).status).toBe(200)
        expect((yield* getFrom(port, "/", "127.0.0.3", spoof)).status).toBe(429)
      }).pipe(Effect.provide(RateLimiterStore.layerMemory))
  )
})
