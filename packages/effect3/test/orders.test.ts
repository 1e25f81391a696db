import { HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { keptOrders, makeOrdersApp, maxKeptBytes, maxOrderBytes } from "../examples/orders.js"
import { IdempotencyStore, RateLimiterStore } from "../src/index.js"

// examples/orders.ts must not keep whatever its clients send: one client posting large bodies crashed it.

const textOf = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? new TextDecoder().decode(response.body.body) : ""

describe("examples/orders.ts keeps a bounded amount", () => {
  it("keptOrders forgets the oldest orders once the budget is spent", () => {
    const kept = keptOrders(10_000)
    for (let i = 1; i <= 1_000; i++) kept.add({ id: `o-${i}`, note: "x".repeat(100) }, "alice", 110)
    expect(kept.bytes()).toBeLessThanOrEqual(10_000)
    // (256 + 110) bytes an order: the newest 27 fit
    expect(kept.size()).toBe(27)
    expect(kept.get("o-1000")?.order).toMatchObject({ id: "o-1000" })
    expect(kept.get("o-973")).toBeUndefined()
    expect(Array.from(kept.all(), (k) => k.order.id)[0]).toBe("o-974")
  })

  it("the defaults: 4 KiB an order, about 32 MiB in all", () => {
    expect(maxOrderBytes).toBe(4096)
    expect(maxKeptBytes).toBe(32 * 1024 * 1024)
    const kept = keptOrders(maxKeptBytes)
    for (let i = 0; i < 20_000; i++) kept.add({ id: `o-${i}` }, "alice", maxOrderBytes)
    expect(kept.bytes()).toBeLessThanOrEqual(maxKeptBytes)
  })

  it.scoped("POST /orders refuses a body over maxOrderBytes with 413; the read endpoints show the kept orders", () =>
    Effect.gen(function*() {
      const { app, created } = yield* makeOrdersApp({
        rate: { capacity: 1000, refillPerSecond: 1000 },
        apiKeys: new Map([["key-a", "alice"]]),
        keep: { maxOrderBytes: 64, maxKeptBytes: 5 * (256 + 20) }
      })
      const send = (method: string, path: string, init: { key?: string; body?: string } = {}) =>
        Effect.provideService(
          app,
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
