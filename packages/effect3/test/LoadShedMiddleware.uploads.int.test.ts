import { HttpServer, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { connect, type Socket } from "node:net"
import { IdempotencyMiddleware, IdempotencyStore, LoadShedMiddleware } from "../src/index.js"
import { eventually } from "./support/eventually.js"
import { post, serve, TestServer } from "./support/httpServer.js"

// Over real HTTP: a client that sends the headers of a POST and one byte of its body, then goes silent, must not
// hold a slot of the server's capacity, and is answered 408 once `bodyTimeout` has passed.

interface Idle {
  readonly socket: Socket
  /** Everything the server sent back. */
  received: string
  closed: boolean
}

/** Opens a connection that sends the headers of `POST /orders` and the first byte of its body, and no more. */
const idleUpload = (port: number, key: string) =>
  Effect.acquireRelease(
    Effect.async<Idle>((resume) => {
      const socket = connect({ host: "127.0.0.1", port }, () => {
        socket.write(
          "POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
            `Content-Length: 20\r\nIdempotency-Key: ${key}\r\n\r\n{`
        )
        resume(Effect.succeed(idle))
      })
      const idle: Idle = { socket, received: "", closed: false }
      socket.on("data", (chunk) => (idle.received += chunk.toString("latin1")))
      socket.on("close", () => (idle.closed = true))
      socket.on("error", () => {})
    }),
    (idle) => Effect.sync(() => idle.socket.destroy())
  )

describe("LoadShedMiddleware over real HTTP", () => {
  it.live("idle uploads hold no slot: others are served, and the idle ones get 408 problem+json", () =>
    Effect.gen(function*() {
      // examples/orders.ts in small: 4 orders at a time, 20 ms each, the others waiting in line
      const resource = yield* Effect.makeSemaphore(4)
      const create = resource.withPermits(1)(
        Effect.zipRight(Effect.sleep("20 millis"), Effect.succeed(HttpServerResponse.text("created", { status: 201 })))
      )
      const shed = yield* LoadShedMiddleware.make() // the defaults: bodyTimeout 5 s
      const idempotent = yield* IdempotencyMiddleware.make()
      let entered = 0
      const counted = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
        Effect.zipRight(Effect.sync(() => entered++), app)
      yield* serve(counted(shed(idempotent(create))))
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0

      const idle = yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => `idle-${i}`),
        (key) => idleUpload(port, key)
      )
      // the server has their headers: their requests are in the middleware
      yield* eventually(Effect.sync(() => entered === 8))

      // another client's orders, one after another, are all served while the uploads stall
      const statuses: Array<number> = []
      for (let i = 0; i < 20; i++) statuses.push((yield* post("/orders", { key: `other-${i}`, body: { i } })).status)
      expect(statuses).toEqual(Array.from({ length: 20 }, () => 201))
      expect(idle.every((upload) => upload.received === "")).toBe(true)

      // the idle ones are answered once their bodies are overdue, and their connections closed
      yield* eventually(Effect.sync(() => idle.every((upload) => upload.closed)), { every: "50 millis" })
      for (const upload of idle) {
        const [head, body] = upload.received.split("\r\n\r\n")
        expect(head).toMatch(/^HTTP\/1\.1 408 /)
        expect(head!.toLowerCase()).toContain("content-type: application/problem+json")
        expect(head!.toLowerCase()).toContain("connection: close")
        expect(JSON.parse(body!)).toMatchObject({ status: 408, title: "Request Timeout" })
      }
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(TestServer, IdempotencyStore.layerMemory))))
})
