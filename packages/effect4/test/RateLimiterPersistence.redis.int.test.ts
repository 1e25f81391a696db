import { expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as RateLimiterPersistence from "../src/RateLimiter/Persistence.js"
import * as RateLimiterStoreRedis from "../src/RateLimiterStore/Redis.js"
import { deleteKeys, REDIS_URL, uniquePrefix } from "./support/redis.js"
import { describeRedis } from "./support/services.js"

// Effect 4 only: effect-resilience/RateLimiter/Persistence bridges Effect 4's own RateLimiter service to this
// library's stores; the store's shared behaviour is the contract's (test/contract/RateLimiterStore.redis.int.test.ts).
const prefix = uniquePrefix("rl-bridge")
let counter = 0
const fresh = (what: string) => `${what}-${++counter}`

describeRedis("RateLimiter/Persistence over RateLimiterStore/Redis", () => {
  it.effect("Effect's RateLimiter service over it: two processes' bridges share one limit", () =>
    Effect.gen(function*() {
      const name = fresh("bridge")
      // two layers, two connections (open for the test's scope): what two processes sharing the store have
      const process = Effect.flatMap(
        Layer.build(RateLimiterStoreRedis.layer({ url: REDIS_URL, prefix, expiryMargin: "1 minute" })),
        (context) => Effect.provideContext(RateLimiterPersistence.make({ name }), context)
      )
      const [a, b] = [yield* process, yield* process]
      const admitted: Array<string> = []
      for (let i = 0; i < 4; i++) {
        for (const [which, limiter] of [["a", a], ["b", b]] as const) {
          const exit = yield* Effect.exit(limiter.consume({ key: "partner", limit: 3, window: "10 seconds" }))
          if (exit._tag === "Success") admitted.push(which)
        }
      }
      expect(admitted).toEqual(["a", "b", "a"])
    }).pipe(Effect.scoped))
  it("cleans up", () => Effect.runPromise(Effect.promise(() => deleteKeys(prefix))))
})
