/**
 * The store's part of RateLimitMiddleware.outage.test.ts: a decision a store made because its backend
 * failed says so (`outage: true`), and a counted one does not. (The middleware's 503 comes with the HTTP port.)
 */
import { loggedMessages } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { RateLimiter, RateLimiterStore } from "effect-resilience"
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

const decide = (make: Effect.Effect<RateLimiter.RateLimiter, never, RateLimiterStore.RateLimiterStore>) =>
  Effect.flatMap(make, (limiter) => limiter.tryAcquire("customer-7"))

describe("RateLimiterStore when the store is down", () => {
  it.effect("the decision says it came from an outage; a counted one does not", () =>
    Effect.gen(function*() {
      const down = yield* Effect.provide(
        decide(RateLimiter.tokenBucket({ capacity: 5, refillPerSecond: 1 })),
        storeDown()
      )
      expect(down).toMatchObject({ allowed: false, limit: 5, outage: true })
      expect(Duration.toMillis(down.retryAfter)).toBe(1000)
      const counted = yield* Effect.provide(
        decide(RateLimiter.tokenBucket({ capacity: 5, refillPerSecond: 1 })),
        RateLimiterStore.layerMemory
      )
      // the contract's five fields only: a decision the store counted has no `outage` at all
      expect(Object.keys(counted).sort()).toEqual(["allowed", "limit", "remaining", "resetAfter", "retryAfter"])
    }))

  it.effect("fail closed: denied with retryAfterOnError, and no quota claimed", () =>
    Effect.gen(function*() {
      const down = yield* Effect.provide(
        decide(RateLimiter.fixedWindow({ limit: 100, window: "10 seconds" })),
        storeDown({ retryAfterOnError: "2500 millis" })
      )
      expect(down).toMatchObject({ allowed: false, limit: 100, remaining: 0, outage: true })
      expect(Duration.toMillis(down.retryAfter)).toBe(2500)
      expect(Duration.toMillis(down.resetAfter)).toBe(2500)
    }))

  it.effect("fail open: allowed, marked as an outage, claiming no quota either", () =>
    Effect.gen(function*() {
      const open = yield* Effect.provide(
        decide(RateLimiter.fixedWindow({ limit: 100, window: "10 seconds" })),
        storeDown({ onError: "allow" })
      )
      expect(open).toMatchObject({ allowed: true, limit: 100, remaining: 0, outage: true })
      expect(Duration.toMillis(open.retryAfter)).toBe(0)
      expect(Duration.toMillis(open.resetAfter)).toBe(0)
    }))

  it.effect("a store of your own says so with `outage: true` on its decision", () =>
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
      const decision = yield* Effect.provideService(
        decide(RateLimiter.slidingWindow({ limit: 10, window: "1 minute" })),
        RateLimiterStore.RateLimiterStore,
        own
      )
      expect(decision).toMatchObject({ allowed: false, outage: true })
      expect(Duration.toMillis(decision.retryAfter)).toBe(4000)
    }))
})
