/**
 * The security review's cases whose sockets are the point, over the edition's NodeHttpServer
 * (./support/idempotencyNode.ts): the client scope is the connection's own address (no header can name another
 * client), a Content-Length that lies is refused before the body is read, and the wiring the docs show serves
 * one order for three POSTs. The other cases run in memory: IdempotencyMiddleware.security.test.ts.
 */
import { jsonResponse, scoped, serveAsDocumented } from "#edition"
import { describe, expect } from "@effect/vitest"
import { Effect } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import { post, rawClient, serveNode, statusOf } from "./support/idempotencyNode.js"

/** An orders endpoint whose handler counts its runs and answers 201 with the order's location. */
const counted = () => {
  let runs = 0
  const handler = Effect.suspend(() => {
    const n = ++runs
    return Effect.succeed(
      jsonResponse({ id: n }, { status: 201, headers: { location: `/orders/${n}` } })
    )
  })
  return { handler, runs: () => runs }
}

const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(IdempotencyStore.layerMemory))

describe("IdempotencyMiddleware wiring, over sockets", () => {
  scoped("three POSTs with one key, wired as documented, make one order", () =>
    Effect.gen(function*() {
      const orders = counted()
      // as make's JSDoc shows: the middleware built once, the store provided once
      const port = yield* serveAsDocumented(orders.handler)
      for (let i = 0; i < 3; i++) {
        expect((yield* post(port, "/orders", { key: "once", body: { sku: "A" } })).status).toBe(201)
      }
      expect(orders.runs()).toBe(1)
    }))
})

describe("IdempotencyMiddleware client scopes, over sockets", () => {
  scoped(
    "a header naming another client takes nothing from it: no replay, no squatting",
    () =>
      withStore(Effect.gen(function*() {
        const orders = counted()
        const port = yield* serveNode(orders.handler.pipe(yield* IdempotencyMiddleware.make()))
        const victim = yield* post(port, "/orders", { key: "order-1", body: { sku: "A" } })
        expect(victim.status).toBe(201)
        // another machine names the victim in every header a scope was ever read from
        const forged = { "x-api-key": "127.0.0.1", "x-forwarded-for": "127.0.0.1", forwarded: "for=127.0.0.1" }
        const attacker = yield* post(port, "/orders", {
          key: "order-1",
          body: { sku: "A" },
          headers: forged,
          from: "127.0.0.2"
        })
        expect(attacker.headers["idempotent-replayed"]).toBeUndefined()
        expect(attacker.headers["location"]).toBe("/orders/2") // its own order, not the victim's
        // nor can it squat the victim's keys: another body under the victim's key is the attacker's own key
        const squat = yield* post(port, "/orders", {
          key: "order-2",
          body: { sku: "X" },
          headers: forged,
          from: "127.0.0.2"
        })
        expect(squat.status).toBe(201)
        expect((yield* post(port, "/orders", { key: "order-2", body: { sku: "B" } })).status).toBe(201)
        const replay = yield* post(port, "/orders", { key: "order-1", body: { sku: "A" } })
        expect(replay.headers["location"]).toBe("/orders/1")
        expect(replay.headers["idempotent-replayed"]).toBe("true")
      }))
  )
})

describe("IdempotencyMiddleware what held up, kept so, over sockets", () => {
  scoped(
    "a Content-Length over the limit is refused before the body is read, and claims nothing",
    () =>
      withStore(Effect.gen(function*() {
        const orders = counted()
        const port = yield* serveNode(orders.handler.pipe(yield* IdempotencyMiddleware.make({ maxBodyBytes: 100 })))
        // declares a gigabyte, sends two bytes: answered at once, without waiting for the rest
        const lying = rawClient(
          port,
          "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: liar\r\nContent-Length: 1000000000\r\n" +
            "Connection: close\r\n\r\n{}"
        )
        expect(statusOf(yield* lying.reply)).toBe(413)
        // the key was not claimed: the honest request with it runs
        expect((yield* post(port, "/orders", { key: "liar" })).status).toBe(201)
        expect(orders.runs()).toBe(1)
      }))
  )
})
