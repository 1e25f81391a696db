/**
 * Part of the Effect 3 edition's IdempotencyMiddleware.security.test.ts, on Effect 4: the cases whose mechanics
 * Effect 4 changes (the deadline as a `Context.Reference`, body types, multipart parsing from the bytes read).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import { Deadline, DeadlineMiddleware, IdempotencyMiddleware, IdempotencyStore } from "../src/index.js"
import { serve } from "./support/memoryServer.js"

const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(IdempotencyStore.layerMemory))

describe("IdempotencyMiddleware on Effect 4's requests and responses", () => {
  it.effect("a body over maxResponseBytes is answered in full, replayed without it, and both say so", () =>
    withStore(Effect.gen(function*() {
      const big = "x".repeat(100)
      let runs = 0
      const handler = Effect.sync(() =>
        ++runs === 1
          ? HttpServerResponse.text(big, { status: 201, headers: { location: "/orders/1" } })
          : HttpServerResponse.stream(Stream.make(new TextEncoder().encode(big)), { status: 201 })
      )
      const send = yield* serve(handler.pipe(yield* IdempotencyMiddleware.make({ maxResponseBytes: 10 })))
      for (const key of ["plain", "streamed"]) {
        const first = yield* send({ key })
        expect(first.body).toBe(big)
        expect(first.headers[IdempotencyMiddleware.bodyOmittedHeader]).toBe("omitted")
        const replay = yield* send({ key })
        expect(replay.status).toBe(201)
        expect(replay.body).toBe("")
        expect(replay.headers["idempotent-replayed"]).toBe("true")
        expect(replay.headers[IdempotencyMiddleware.bodyOmittedHeader]).toBe("omitted")
      }
      expect(runs).toBe(2)
    })))

  it.effect("a client's short deadline does not reach into the handler: no typed failure after the commit", () =>
    withStore(Effect.gen(function*() {
      let commits = 0
      // commits, then makes a deadline-aware call (e.g. to a downstream service) that takes 300 ms
      const handler = Effect.gen(function*() {
        const n = ++commits
        yield* Effect.sleep("300 millis").pipe(Deadline.timeout("5 seconds"))
        return HttpServerResponse.jsonUnsafe({ order: n }, { status: 201 })
      })
      const idempotent = yield* IdempotencyMiddleware.make()
      const send = yield* serve(handler.pipe(idempotent, DeadlineMiddleware.make()))
      const first = yield* Effect.forkChild(send({ key: "d", headers: { "request-timeout-ms": "50" } }))
      yield* TestClock.adjust("50 millis")
      expect((yield* Fiber.join(first)).status).toBe(504)
      yield* TestClock.adjust("250 millis")
      const retry = yield* send({ key: "d" })
      expect(retry.status).toBe(201)
      expect(retry.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
      expect(commits).toBe(1)
    })))

  it.effect("multipart bodies reach the handler, parsed from the bytes the middleware read", () =>
    withStore(Effect.gen(function*() {
      const handler = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.map(
          Stream.runCollect(request.multipartStream),
          (parts) => HttpServerResponse.text(parts.map((part) => part.key).join(","), { status: 201 })
        )).pipe(Effect.orDie)
      const send = yield* serve(handler.pipe(yield* IdempotencyMiddleware.make()))
      const boundary = "----boundary7MA4YWxk"
      const field = (name: string, value: string) =>
        `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`
      const body = `${field("sku", "A")}${field("qty", "2")}--${boundary}--\r\n`
      const reply = yield* send({
        key: "multi",
        body,
        headers: { "content-type": `multipart/form-data; boundary=${boundary}` }
      })
      expect(reply.status).toBe(201)
      expect(reply.body).toBe("sku,qty")
      // and the key holds: the same form again is a replay
      const again = yield* send({
        key: "multi",
        body,
        headers: { "content-type": `multipart/form-data; boundary=${boundary}` }
      })
      expect(again.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
    })))
})
