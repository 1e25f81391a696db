import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { RateLimitHeaders } from "../src/index.js"
import { orderCount, postOrder, request, startServe } from "./support/serveProcess.js"

// Black-box tests of `npm run serve`: a separate process, spoken to over HTTP only.
describe("npm run serve", () => {
  it.live("creates an order once per Idempotency-Key and replays it", () =>
    Effect.gen(function*() {
      const { url } = yield* startServe()
      expect((yield* request(`${url}/health`)).status).toBe(200)
      const first = yield* postOrder(url, { key: "order-1", body: { sku: "A", qty: 2 } })
      expect(first.status).toBe(201)
      const order = JSON.parse(first.body)
      expect(order).toMatchObject({ sku: "A", qty: 2 })
      expect(typeof order.id).toBe("string")
      const again = yield* postOrder(url, { key: "order-1", body: { sku: "A", qty: 2 } })
      expect(again.status).toBe(201)
      expect(again.body).toBe(first.body)
      expect(again.headers.get("idempotent-replayed")).toBe("true")
      expect(yield* orderCount(url)).toBe(1)

      expect((yield* postOrder(url, { key: "order-1", body: { sku: "B" } })).status).toBe(422)
      expect((yield* postOrder(url, {})).status).toBe(400)
      expect(yield* orderCount(url)).toBe(1)
    }).pipe(Effect.scoped), 30_000)

  it.live("a duplicate during a slow request gets 409; a crash releases the key", () =>
    Effect.gen(function*() {
      const { url } = yield* startServe()
      // two requests with one key: whichever claims first holds it for 3 s of the server's own time
      const both = yield* Effect.all(
        [
          postOrder(url, { key: "slow", query: "?delayMs=3000" }),
          postOrder(url, { key: "slow", query: "?delayMs=3000" })
        ],
        { concurrency: 2 }
      )
      const statuses = both.map((a) => a.status).sort()
      expect(statuses).toEqual([201, 409])
      expect(both.find((a) => a.status === 409)!.headers.get("retry-after")).toBe("1")

      expect((yield* postOrder(url, { key: "crashy", query: "?crash=1" })).status).toBe(500)
      const retried = yield* postOrder(url, { key: "crashy" })
      expect(retried.status).toBe(201)
      expect(retried.headers.get("idempotent-replayed")).toBeNull()
      expect((yield* postOrder(url, { key: "failing", query: "?fail=500" })).status).toBe(500)
      const replayed500 = yield* postOrder(url, { key: "failing", query: "?fail=500" })
      expect(replayed500.status).toBe(500)
      expect(replayed500.headers.get("idempotent-replayed")).toBe("true")
      expect(yield* orderCount(url)).toBe(2)
    }).pipe(Effect.scoped), 30_000)

  it.live("--rate limits POST /orders with 429 and RateLimit headers", () =>
    Effect.gen(function*() {
      const { url } = yield* startServe(["--rate", "2:0.1"])
      const answers = []
      for (let i = 0; i < 3; i++) answers.push(yield* postOrder(url, { key: `r-${i}` }))
      expect(answers.map((a) => a.status)).toEqual([201, 201, 429])
      const denied = answers[2]!
      expect(Number(denied.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
      expect(RateLimitHeaders.parsePolicy(denied.headers.get("ratelimit-policy")!)._tag).toBe("Some")
      expect(yield* orderCount(url)).toBe(2)
    }).pipe(Effect.scoped), 30_000)

  it.live("rejects bad command-line options", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(startServe(["--rate", "lots"]))
      expect(exit._tag).toBe("Failure")
    }).pipe(Effect.scoped), 30_000)
})
