/**
 * The rate limiter store in Redis (or Redis Cluster), shared by every process that uses it, on `ioredis`.
 * This entry point imports `ioredis` (an optional peer dependency); the package root does not.
 *
 * @since 0.1.0
 */
import type { Layer } from "effect"
import * as internal from "../internal/rateLimiterStore/redis.js"
import type * as redisOptions from "../internal/redis/options.js"
import type { RateLimiterStore } from "../RateLimiterStore.js"

/**
 * Options of the Redis store: exactly one of a client you own (`client`, an ioredis `Redis` or `Cluster`,
 * never closed by the layer), a `url` of one node, or the startup nodes of a Redis Cluster (`cluster`, with
 * optional `clusterOptions`); the layer connects to the last two itself and disconnects when it is released
 * (`redisOptions` / `clusterOptions` are passed to ioredis). Keys and slots: `docs/redis.md`.
 *
 * - `prefix`: put before every key (default `"rl:"`); must not contain `{` or `}`.
 * - `timeout`: a decision Redis has not answered by then counts as an outage (default 1 second).
 * - `onError`: what an outage (error or timeout) decides — `"deny"` (default: fail closed, with
 *   `retryAfter` = `retryAfterOnError`, default 1 second) or `"allow"` (fail open). Either way the decision is
 *   marked `outage: true` (the rate-limit middleware answers a denial with 503, not 429) and a warning is
 *   logged, at most once every 10 seconds.
 * - `expiryMargin`: how long after a key is back to its initial state Redis deletes it (default 1 second)
 *   — the tolerance for clock skew between the processes sharing the store.
 *
 * @since 0.1.0
 * @category models
 */
export type Options = redisOptions.Connection & redisOptions.RateLimiterOptions

/**
 * The store as a layer. Each decision is one Lua script call (`EVALSHA`, falling back to `EVAL`) computing
 * exactly what the memory store computes, at the `nowMillis` the limiter passes; idle keys expire on their
 * own (`PX`). Keys of one limiter and key share a Cluster hash tag. See `docs/stores.md`.
 *
 * Throws `IllegalArgumentException` for options naming no connection (or more than one), a prefix with
 * braces, an unknown `onError` or a malformed duration.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter } from "effect-resilience"
 * import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.tokenBucket({ capacity: 10, refillPerSecond: 5, name: "api" })
 *   return yield* limiter.tryAcquire("user-42")
 * }).pipe(Effect.provide(RateLimiterStoreRedis.layer({ url: "redis://127.0.0.1:6379" })))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options: Options) => Layer.Layer<RateLimiterStore> = internal.layer
