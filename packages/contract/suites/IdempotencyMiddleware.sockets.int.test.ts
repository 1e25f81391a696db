/**
 * The idempotency middleware where the sockets are the point, over a real server (the edition's NodeHttpServer,
 * ./support/idempotencyNode.ts) and raw bytes an HTTP client would refuse or rewrite: keys with bytes no header
 * may carry, a chunked body past the bound, the request line's target as sent, and a body an outer middleware
 * read from the socket first (a logger, an HMAC check). Everything else the middleware does is in
 * ./IdempotencyMiddleware.test.ts, served in memory.
 */
import { edition, HttpServerRequest, HttpServerResponse, scoped } from "#edition"
import { describe, expect } from "@effect/vitest"
import { Effect } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import { rawClient, serveNode, statusOf } from "./support/idempotencyNode.js"

type App = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>

/** Sends raw bytes to the server on `port`; what it answered once it closed the connection. */
const raw = (port: number, request: string) => rawClient(port, request).reply

const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(IdempotencyStore.layerMemory))

/** A handler answering 201 `run <n>`, counting its runs. */
const counted = () => {
  let runs = 0
  const handler = Effect.sync(() => HttpServerResponse.text(`run ${++runs}`, { status: 201 }))
  return { handler, runs: () => runs }
}

describe("IdempotencyMiddleware over sockets", () => {
  scoped(
    "a key with bytes an HTTP client refuses to send (a control character, non-ASCII) gets 400",
    () =>
      withStore(Effect.gen(function*() {
        const orders = counted()
        const port = yield* serveNode(orders.handler.pipe(yield* IdempotencyMiddleware.make()))
        for (const key of ["a\u0001b", "cl\u00e9"]) {
          const reply = yield* raw(
            port,
            `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`
          )
          expect(statusOf(reply), `key ${JSON.stringify(key)}`).toBe(400)
        }
        expect(orders.runs()).toBe(0)
      }))
  )

  scoped(
    "a chunked body past maxBodyBytes gets 413 and never reaches the handler",
    () =>
      withStore(Effect.gen(function*() {
        const orders = counted()
        const port = yield* serveNode(orders.handler.pipe(yield* IdempotencyMiddleware.make({ maxBodyBytes: 100 })))
        // no Content-Length: the body is chunked, and the read stops once it is too large
        const chunk = "x".repeat(80)
        const reply = yield* raw(
          port,
          "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: chunky\r\nTransfer-Encoding: chunked\r\n" +
            `Connection: close\r\n\r\n50\r\n${chunk}\r\n50\r\n${chunk}\r\n0\r\n\r\n`
        )
        expect(statusOf(reply)).toBe(413)
        expect(orders.runs()).toBe(0)
      }))
  )

  scoped(
    "fingerprints the request line's target as sent, whatever the Host header says",
    () =>
      withStore(Effect.gen(function*() {
        // every target answered, no router in between: the middleware alone decides
        const orders = counted()
        const port = yield* serveNode(orders.handler.pipe(yield* IdempotencyMiddleware.make()))
        // raw bytes: an HTTP client would drop the fragment, and refuses a malformed Host
        const sent = (target: string, host = "127.0.0.1") =>
          raw(
            port,
            `POST ${target} HTTP/1.1\r\nHost: ${host}\r\nIdempotency-Key: target\r\nContent-Type: application/json\r\n` +
              "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
          )
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
        expect(orders.runs()).toBe(1)
      }))
  )

  describe("behind a middleware that read the body first (a logger, an HMAC check)", () => {
    /** An outer middleware that reads the body (as text or as bytes) before the app. */
    const readFirst = (read: "text" | "arrayBuffer") => (app: App): App =>
      Effect.flatMap(
        HttpServerRequest.HttpServerRequest,
        (request) =>
          Effect.andThen(
            Effect.orDie(read === "text" ? Effect.asVoid(request.text) : Effect.asVoid(request.arrayBuffer)),
            app
          )
      )

    /** A handler that answers the bytes it was given, in hex, behind an outer middleware that read the body. */
    const served = (read: "text" | "arrayBuffer") =>
      Effect.gen(function*() {
        let runs = 0
        const handler = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          Effect.map(Effect.orDie(request.arrayBuffer), (bytes) => {
            runs++
            return HttpServerResponse.text(Buffer.from(bytes).toString("hex"), { status: 201 })
          }))
        const port = yield* serveNode(readFirst(read)(handler.pipe(yield* IdempotencyMiddleware.make())))
        return {
          port,
          runs: () =>
            runs
        }
      })

    /** A POST of `hex`'s bytes, as raw bytes; the reply read whole once the server closed the connection. */
    const sent = (port: number, key: string, hex: string) =>
      raw(
        port,
        `POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${key}\r\nContent-Type: application/octet-stream\r\n` +
          `Content-Length: ${hex.length / 2}\r\nConnection: close\r\n\r\n${Buffer.from(hex, "hex").toString("latin1")}`
      )
    const bodyOf = (reply: string) => reply.slice(reply.indexOf("\r\n\r\n") + 4)

    scoped(
      "read as text: a UTF-8 body's bytes are the text's, exactly (its BOM too)",
      () =>
        withStore(Effect.gen(function*() {
          const orders = yield* served("text")
          const utf8 = Buffer.from("\uFEFF{\"sku\":\"caf\u00e9 \u2615\"}", "utf8").toString("hex")
          const first = yield* sent(orders.port, "utf8", utf8)
          expect(statusOf(first)).toBe(201)
          expect(bodyOf(first)).toBe(utf8) // the handler got the bytes sent
          const again = yield* sent(orders.port, "utf8", utf8)
          expect(again.toLowerCase()).toContain("idempotent-replayed: true")
          expect(statusOf(yield* sent(orders.port, "utf8", Buffer.from("{\"sku\":\"cafe\"}").toString("hex")))).toBe(
            422
          )
          expect(orders.runs()).toBe(1)
        }))
    )

    // Whether the bytes an outer middleware read are still there differs on purpose: Effect 4's requests keep the
    // bytes once read, Effect 3's Node requests keep only the text (and a read as bytes keeps nothing). Where they
    // are gone the answer says so (500 body-consumed); never is another body's answer given.
    scoped(
      "read as text: bytes that are not UTF-8 are the bytes sent, or the answer says they are gone",
      () =>
        withStore(Effect.gen(function*() {
          const orders = yield* served("text")
          // ff01 and fe01 both decode to "\uFFFD\u0001": the text cannot tell them apart
          const replies: Array<string> = []
          for (const hex of ["ff01", "fe01", "ff01"]) replies.push(yield* sent(orders.port, "binary", hex))
          if (edition === "effect3") {
            for (const reply of replies) {
              expect(statusOf(reply)).toBe(500)
              expect(reply).toContain("application/problem+json")
              expect(JSON.parse(bodyOf(reply)).type).toContain("body-consumed")
            }
            expect(orders.runs()).toBe(0)
          } else {
            expect(replies.map(statusOf)).toEqual([201, 422, 201])
            expect(bodyOf(replies[0]!)).toBe("ff01")
            expect(replies[2]!.toLowerCase()).toContain("idempotent-replayed: true")
            expect(orders.runs()).toBe(1)
          }
        }))
    )

    scoped(
      "read as bytes: the bytes sent, or at once the answer that they are gone, not a wait for the stream",
      () =>
        withStore(Effect.gen(function*() {
          const orders = yield* served("arrayBuffer")
          const reply = yield* sent(orders.port, "bytes", "ff01")
          if (edition === "effect3") {
            expect(statusOf(reply)).toBe(500)
            expect(JSON.parse(bodyOf(reply)).type).toContain("body-consumed")
            expect(orders.runs()).toBe(0)
          } else {
            expect(statusOf(reply)).toBe(201)
            expect(bodyOf(reply)).toBe("ff01")
            expect(orders.runs()).toBe(1)
          }
        })),
      20_000
    )

    scoped(
      "read before, on a request copied since (a router's prefix): 500, not a wait for the spent stream",
      () =>
        withStore(Effect.gen(function*() {
          const orders = counted()
          // between the reader and ours, a copy of the request (`request.modify`, as a router's prefix does): the
          // copy starts without the cached body
          const copied = (app: App): App =>
            Effect.flatMap(
              HttpServerRequest.HttpServerRequest,
              (request) =>
                Effect.provideService(app, HttpServerRequest.HttpServerRequest, request.modify({ url: request.url }))
            )
          const port = yield* serveNode(
            readFirst("text")(copied(orders.handler.pipe(yield* IdempotencyMiddleware.make())))
          )
          for (const hex of ["7b7d", "5b5d"]) {
            const reply = yield* sent(port, "copied", hex)
            expect(statusOf(reply), hex).toBe(500)
            expect(JSON.parse(bodyOf(reply)).type).toContain("body-consumed")
          }
          // a request that declares no body has none to lose
          expect(statusOf(yield* sent(port, "empty", ""))).toBe(201)
          expect(orders.runs()).toBe(1)
        })),
      20_000
    )
  })
})
