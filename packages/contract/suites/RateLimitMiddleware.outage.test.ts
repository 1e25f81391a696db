import { HttpServerRequest, HttpServerResponse, loggedMessages, scoped } from "#edition"
import { describe, expect } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { RateLimiter, RateLimiterStore, RateLimitMiddleware } from "effect-resilience"
import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
import type { Redis } from "ioredis"

/** A Redis client whose every script call fails, as one does while Redis is unreachable: no socket is opened. */
const unreachable = {
  evalsha: () => Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:6379")),
  eval: () => Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:6379"))
} as unknown as Redis

const quiet = loggedMessages([])

const storeDown = (options: Partial<RateLimiterStoreRedis.Options> = {}) =>
  Layer.merge(RateLimiterStoreRedis.layer({ client: unreachable, ...options } as RateLimiterStoreRedis.Options), quiet)

/** Runs the wrapped handler for one request from one client; counts the handler's runs. */
const serveOnce = (limiter: RateLimiter.RateLimiter) => {
  const runs = { count: 0 }
  const app = Effect.sync(() => {
    runs.count++
    return HttpServerResponse.text("ok")
  }).pipe(RateLimitMiddleware.make({ limiter, scope: () => Effect.succeed("customer-7") }))
  const call = Effect.provideService(
    app,
    HttpServerRequest.HttpServerRequest,
    HttpServerRequest.fromWeb(new Request("http://127.0.0.1/orders"))
  )
  return { call, runs }
}

const bodyOf = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? JSON.parse(new TextDecoder().decode(response.body.body)) : undefined

describe("RateLimitMiddleware when the store is down", () => {
  scoped(
    "fail closed: 503 with its own problem type and Retry-After, and no quota claimed",
    () =>
      Effect.gen(function*() {
        const limiter = yield* RateLimiter.fixedWindow({ limit: 100, window: "10 seconds" })
        const { call, runs } = serveOnce(limiter)
        const response = yield* call
        // it was 429 "quota of 100 per 10 s exceeded" with RateLimit: r=0, while nobody had used the quota
        expect(response.status).toBe(503)
        expect(response.headers["content-type"]).toBe("application/problem+json")
        expect(response.headers["retry-after"]).toBe("3")
        expect(response.headers["ratelimit"]).toBeUndefined()
        expect(response.headers["ratelimit-policy"]).toBeUndefined()
        const body = bodyOf(response)
        expect(body.type).toBe(RateLimitMiddleware.storeUnavailableType)
        expect(body.type).toMatch(/^urn:effect-resilience:problem:/)
        expect(body.status).toBe(503)
        expect(body.detail).not.toMatch(/quota|exceeded/)
        expect(runs.count).toBe(0)
      }).pipe(Effect.provide(storeDown({ retryAfterOnError: "2500 millis" })))
  )

  scoped("the decision says it came from an outage; a counted one does not", () =>
    Effect.gen(function*() {
      const down = yield* Effect.provide(
        Effect.flatMap(RateLimiter.tokenBucket({ capacity: 5, refillPerSecond: 1 }), (l) => l.tryAcquire("k")),
        storeDown()
      )
      expect(down).toMatchObject({ allowed: false, limit: 5, outage: true })
      expect(Duration.toMillis(down.retryAfter)).toBe(1000)
      const counted = yield* Effect.provide(
        Effect.flatMap(RateLimiter.tokenBucket({ capacity: 5, refillPerSecond: 1 }), (l) => l.tryAcquire("k")),
        RateLimiterStore.layerMemory
      )
      // the contract's five fields only: a decision the store counted has no `outage` at all
      expect(Object.keys(counted).sort()).toEqual(["allowed", "limit", "remaining", "resetAfter", "retryAfter"])
    }))

  scoped("fail open: the handler runs, and the response claims no quota either", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.fixedWindow({ limit: 100, window: "10 seconds" })
      const { call, runs } = serveOnce(limiter)
      const response = yield* call
      expect(response.status).toBe(200)
      expect(runs.count).toBe(1)
      // RateLimit: r=0 would tell a well-behaved client to stop
      expect(response.headers["ratelimit"]).toBeUndefined()
      expect(response.headers["ratelimit-policy"]).toBeUndefined()
    }).pipe(Effect.provide(storeDown({ onError: "allow" }))))

  scoped("a store of your own says so with `outage: true` on its decision", () =>
    Effect.gen(function*() {
      const outage: RateLimiterStore.StoreDecision = {
        allowed: false,
        limit: 10,
        remaining: 0,
        retryAfterMillis: 4000,
        resetAfterMillis: 4000,
        outage: true
      }
      const own: RateLimiterStore.Store = {
        tokenBucket: () => Effect.succeed(outage),
        fixedWindow: () => Effect.succeed(outage),
        slidingWindow: () => Effect.succeed(outage)
      }
      const limiter = yield* Effect.provideService(
        RateLimiter.slidingWindow({ limit: 10, window: "1 minute" }),
        RateLimiterStore.RateLimiterStore,
        own
      )
      const response = yield* serveOnce(limiter).call
      expect(response.status).toBe(503)
      expect(response.headers["retry-after"]).toBe("4")
    }))
})
