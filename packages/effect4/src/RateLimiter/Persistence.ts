/**
 * This library's rate limiters presented as Effect 4's own rate-limiter service (`RateLimiter` from
 * `effect/persistence`), so that `HttpClient.withRateLimiter`, `RateLimiter.makeWithRateLimiter` and anything
 * else written against Effect's service decide with our algorithms and stores: the memory store, or Redis shared
 * by every process (`effect-resilience/RateLimiterStore/Redis`, on ioredis).
 *
 * Effect's service is not one limiter but a store of them: every `consume` call names its own algorithm, limit,
 * window and key, and `HttpClient.withRateLimiter` changes the limit and window as it learns them from response
 * headers. So a single limiter of ours (fixed limit, fixed window) cannot stand in for it without ignoring what the
 * caller asks; this bridge is built from our `RateLimiterStore` instead, and decides each call with a limiter of
 * exactly the parameters the call names:
 *
 * - `"token-bucket"`: our token bucket, `limit` tokens refilled continuously over `window` (Effect's refills whole
 *   tokens at intervals);
 * - `"fixed-window"` (Effect's default): our fixed window, aligned to multiples of `window` since the epoch (Effect's
 *   starts at a key's first call), or our sliding window with `windows: "sliding-window"`;
 * - `onExceeded: "fail"`: a denial fails with Effect's `RateLimiterError` whose reason is `RateLimitExceeded`
 *   (`retryAfter`: when the same call would pass); a decision the store could not make (Redis down, `onError:
 *   "deny"`) fails with reason `RateLimitStoreError` instead, never as a quota used up;
 * - `onExceeded: "delay"`: the call waits inside `consume` until it is admitted, as `RateLimiter.acquire` does, and
 *   reports a zero `delay` (our limiters reserve nothing ahead, so a reported delay would let every waiter start at
 *   the same instant). The wait respects the fiber's `Deadline`: one that would end past it fails at once with
 *   `RateLimitExceeded`.
 *
 * One key's counters are shared by every limit and window the calls name (the limiters of one algorithm have one
 * name), as Effect's stores key their state by key alone. A limit learned from a header may be fractional: it is
 * rounded down, a fractional `tokens` up, and a window shorter than a millisecond counts as one (as Effect's does).
 * A call whose `tokens` exceed the limit fails with `RateLimitExceeded` and the window as `retryAfter`, as Effect's
 * does; `tokens`, `limit` or `window` that are not positive numbers die with `IllegalArgumentError`.
 *
 * Not bridged: Effect's adaptive learning (`adaptiveConsume`, `adaptiveFeedback`, which learn a server's limit from
 * 429 responses) — this store keeps no such state and answers "inactive", as Effect's contract allows for a key it
 * has none for; `withRateLimiter` still waits out a 429's `Retry-After` before its retry.
 *
 * This is its own entry point because `effect/persistence` loads Effect's Schema: the package root does not.
 *
 * @since 1.0.0
 */
import type { Effect, Layer } from "effect"
import type { RateLimiter } from "effect/persistence"
import * as internal from "../internal/rateLimiterPersistence.js"
import type { RateLimiterStore } from "../RateLimiterStore.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /**
   * Names the counters in the store (with the algorithm): bridges with the same name share them, across processes
   * with a shared store, as Effect's own stores share a key's state. Default `"effect-persistence"`.
   */
  readonly name?: string
  /**
   * What Effect's `"fixed-window"` algorithm runs as: our fixed window (default), or our sliding window, which has
   * no burst of twice the limit at a window's edge. (Effect has no sliding window of its own.)
   */
  readonly windows?: "fixed-window" | "sliding-window"
}

/**
 * Effect's `RateLimiter` service over the `RateLimiterStore` in the context. Throws `IllegalArgumentError` for an
 * empty name or an unknown `windows`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpClient, HttpClientRequest } from "effect/http"
 * import { RateLimiterStore } from "effect-resilience"
 * import * as RateLimiterPersistence from "effect-resilience/RateLimiter/Persistence"
 *
 * const program = Effect.gen(function*() {
 *   const client = (yield* HttpClient.HttpClient).pipe(
 *     HttpClient.withRateLimiter({
 *       limiter: yield* RateLimiterPersistence.make(),
 *       key: "partner-api",
 *       algorithm: "token-bucket",
 *       limit: 10,
 *       window: "1 second",
 *       times: 3
 *     })
 *   )
 *   return yield* client.execute(HttpClientRequest.get("https://partner.example/orders"))
 * }).pipe(Effect.provide(RateLimiterStore.layerMemory))
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (options?: Options) => Effect.Effect<RateLimiter.RateLimiter, never, RateLimiterStore> =
  internal.make

/**
 * The same as a layer of Effect's `RateLimiter` service, for code that takes it from the context
 * (`RateLimiter.makeWithRateLimiter`, `yield* RateLimiter.RateLimiter`).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { RateLimiter } from "effect/persistence"
 * import { RateLimiterStore } from "effect-resilience"
 * import * as RateLimiterPersistence from "effect-resilience/RateLimiter/Persistence"
 *
 * declare const sendNewsletter: Effect.Effect<void>
 *
 * const program = Effect.gen(function*() {
 *   const withLimiter = yield* RateLimiter.makeWithRateLimiter
 *   yield* sendNewsletter.pipe(
 *     withLimiter({ key: "mail", limit: 100, window: "1 minute", onExceeded: "delay" })
 *   )
 * }).pipe(
 *   Effect.provide(RateLimiterPersistence.layer({ windows: "sliding-window" }).pipe(
 *     Layer.provide(RateLimiterStore.layerMemory)
 *   ))
 * )
 * ```
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: (options?: Options) => Layer.Layer<RateLimiter.RateLimiter, never, RateLimiterStore> =
  internal.layer
