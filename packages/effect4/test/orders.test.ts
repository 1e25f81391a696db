import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { HttpServerRequest, type HttpServerResponse } from "effect/http"
import { makeOrdersApp } from "../examples/orders.js"
import { IdempotencyStore, RateLimiterStore } from "../src/index.js"

// The Effect 4 edition's examples/orders.ts keeps a bounded amount, as the Effect 3 edition's does (what it keeps,
// examples/support/ordersModel.ts, is shared and tested there, in test/orders.test.ts).

const textOf = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? new TextDecoder().decode(response.body.body) : ""

describe("examples/orders.ts keeps a bounded amount", () => {
  it.effect("POST /orders refuses a body over maxOrderBytes with 413; the read endpoints show the kept orders", () =>
    Effect.gen(function*() {
      const { app, created } = yield* makeOrdersApp({
        rate: { capacity: 1000, refillPerSecond: 1000 },
        apiKeys: new Map([["key-a", "alice"]]),
        keep: { maxOrderBytes: 64, maxKeptBytes: 5 * (256 + 20) }
      })
      const send = (method: string, path: string, init: { key?: string; body?: string } = {}) =>
        Effect.provideService(
          Effect.scoped(app),
          HttpServerRequest.HttpServerRequest,
          HttpServerRequest.fromWeb(
            new Request(`http://127.0.0.1${path}`, {
              method,
              headers: {
                "x-api-key": "key-a",
                "content-type": "application/json",
                ...(init.key === undefined ? {} : { "idempotency-key": init.key })
              },
              ...(init.body === undefined ? {} : { body: init.body })
            })
          )
        )
      const ids: Array<string> = []
      for (let i = 0; i < 10; i++) {
        const answer = yield* send("POST", "/orders", { key: `k-${i}`, body: JSON.stringify({ n: i, pad: "ab" }) })
        expect(answer.status).toBe(201)
        ids.push(JSON.parse(textOf(answer)).id)
      }
      const big = yield* send("POST", "/orders", { key: "big", body: JSON.stringify({ pad: "x".repeat(64) }) })
      expect(big.status).toBe(413)
      const listed = JSON.parse(textOf(yield* send("GET", "/orders"))) as Array<{ id: string; n: number }>
      expect(listed.map((o) => o.n)).toEqual([5, 6, 7, 8, 9])
      expect(created()).toHaveLength(5)
      expect(JSON.parse(textOf(yield* send("GET", "/orders/count")))).toEqual({ count: 5 })
      expect((yield* send("GET", `/orders/${ids[0]}`)).status).toBe(404)
      expect(JSON.parse(textOf(yield* send("GET", `/orders/${ids[9]}`)))).toMatchObject({ n: 9, pad: "ab" })
    }).pipe(Effect.provide(Layer.merge(IdempotencyStore.layerMemory, RateLimiterStore.layerMemory))))
})
