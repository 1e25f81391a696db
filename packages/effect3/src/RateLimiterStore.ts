/**
 * Where rate limiters keep their counters. A store offers one atomic operation per algorithm —
 * read the key's state, decide, write it back — so that a remote store can run each as a single
 * script (one Redis `EVALSHA`) and many processes share one limit.
 *
 * Time is passed in: every operation takes `nowMillis` from the caller's `Clock`. The store never reads a
 * clock of its own, so a limiter is deterministic under `TestClock`. A limiter passes a store of many processes
 * its `Clock.currentTimeMillis` (wall-clock time), so all processes sharing a remote store must have roughly
 * synchronised clocks (NTP) — a skew, or a step, of `d` milliseconds shifts a caller's view of refills and window
 * boundaries by `d`. It passes the memory store the monotonic reading of its `Clock` instead
 * (`Clock.currentTimeNanos` in milliseconds, which the live clock takes from `process.hrtime`): that store's
 * buckets and windows live in one process, and a step of the wall clock does not move them.
 *
 * Users pick the store by providing a layer: {@link layerMemory} for one process, or the layer of a backend
 * entry point, `effect-resilience/RateLimiterStore/Redis` or `effect-resilience/RateLimiterStore/Sql`, for many.
 *
 * @since 0.1.0
 */
import type { Duration, Effect, Layer, Scope } from "effect"
import * as internal from "./internal/rateLimiterStore/memory.js"
import * as service from "./internal/rateLimiterStore/service.js"

/**
 * What a store decided, in plain numbers (milliseconds), as a script can return it.
 * `RateLimiter` turns it into a `Decision` with `Duration`s.
 *
 * @since 0.1.0
 * @category models
 */
export interface StoreDecision {
  readonly allowed: boolean
  /** The capacity (token bucket) or the limit per window. */
  readonly limit: number
  /** Whole units left after the decision. */
  readonly remaining: number
  /** 0 when allowed; otherwise when the same request would pass, in whole milliseconds (`Infinity`: never). */
  readonly retryAfterMillis: number
  /** Time until the key is back to its initial state (bucket full, nothing counted), in whole milliseconds. */
  readonly resetAfterMillis: number
  /**
   * Present (`true`) only when the store could not decide — its backend failed or timed out — and this is its
   * outage policy (deny or allow) rather than a count. The limiter passes it on as `Decision.outage`.
   */
  readonly outage?: true
}

/**
 * The parameters of a token bucket. `name` identifies the limiter: limiters with the same name and
 * algorithm share counters (across processes, with a shared store).
 *
 * @since 0.1.0
 * @category models
 */
export interface TokenBucketParams {
  readonly name: string
  readonly capacity: number
  readonly refillPerSecond: number
}

/**
 * The parameters of a fixed or sliding window; `windowMillis` is the window length in milliseconds.
 *
 * @since 0.1.0
 * @category models
 */
export interface WindowParams {
  readonly name: string
  readonly limit: number
  readonly windowMillis: number
}

/**
 * The operations of the memory store without an effect around them, for synchronous code and benchmarks
 * (see {@link MemoryStore}).
 *
 * @since 0.1.0
 * @category models
 */
export interface SyncStore {
  tokenBucket(key: string, cost: number, params: TokenBucketParams, nowMillis: number): StoreDecision
  fixedWindow(key: string, cost: number, params: WindowParams, nowMillis: number): StoreDecision
  slidingWindow(key: string, cost: number, params: WindowParams, nowMillis: number): StoreDecision
}

/**
 * A rate-limit store. Each operation atomically takes `cost` units from `key` if they are available
 * at `nowMillis` and returns the decision; a denied request changes nothing. `cost` arrives
 * validated (an integer >= 1); a cost above the limit is denied with `retryAfterMillis: Infinity`.
 *
 * Operations cannot fail: a remote store chooses what an outage means (deny, allow, or die) and
 * documents it; a decision made because of an outage carries `outage: true`, so that no one reports it as a
 * quota used up (the rate-limit middleware answers 503, not 429).
 *
 * @since 0.1.0
 * @category models
 */
export interface Store {
  /**
   * Token bucket (GCRA form): the key's state is the instant its bucket is full again. Starts full,
   * refills continuously at `refillPerSecond`.
   */
  readonly tokenBucket: (
    key: string,
    cost: number,
    params: TokenBucketParams,
    nowMillis: number
  ) => Effect.Effect<StoreDecision>
  /** At most `limit` units per window, windows aligned to multiples of `windowMillis` since the epoch. */
  readonly fixedWindow: (
    key: string,
    cost: number,
    params: WindowParams,
    nowMillis: number
  ) => Effect.Effect<StoreDecision>
  /** Weighted two-window counter: `previous * (1 - elapsed / window) + current + cost <= limit`. */
  readonly slidingWindow: (
    key: string,
    cost: number,
    params: WindowParams,
    nowMillis: number
  ) => Effect.Effect<StoreDecision>
}

/**
 * The store service.
 *
 * @since 0.1.0
 * @category tags
 */
export const RateLimiterStore: typeof service.RateLimiterStore = service.RateLimiterStore

/**
 * The service tag's type.
 *
 * @since 0.1.0
 * @category tags
 */
export type RateLimiterStore = service.RateLimiterStore

/**
 * The memory store, with a view of its size for tests and monitoring.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryStore extends Store {
  /** The same operations, synchronous: they share the keys of the effectful ones. */
  readonly sync: SyncStore
  /** Keys held, over all limiters using the store. */
  readonly size: Effect.Effect<number>
  unsafeSize(): number
  /**
   * Evicts every key expired now: at the `Clock` time of the fiber running it, or at the latest instant
   * any call passed the store when that is later. (The background sweep, every `sweepInterval`, uses the
   * callers' time: that latest instant, advanced by the time elapsed since it last changed.)
   */
  readonly evictExpired: Effect.Effect<void>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface MemoryOptions {
  /**
   * How often a background fiber evicts expired keys, so the keys of idle clients go even when no new
   * key arrives. `Duration.infinity` turns it off (eviction then happens only as new keys arrive).
   * Default: 1 second. The interval is slept on the `Clock` of the fiber building the store, but what has
   * expired is judged on the callers' time — the latest `nowMillis` a call passed, advanced only by the time
   * elapsed since — so callers on another clock (a `TestClock`, the layer provided outside it) never lose
   * live keys, and idle keys still go when every caller is idle.
   */
  readonly sweepInterval?: Duration.DurationInput
}

/**
 * A memory store for one process. A key costs memory only while it differs from a fresh key: once a
 * bucket is full again or its windows have passed, the key is evicted.
 *
 * Eviction is O(1) amortised per call, never a scan: each limiter's keys sit in a list in order of
 * last use; every new key first evicts up to 2 expired keys from the front, and a background sweep
 * (every `sweepInterval`) evicts the expired front in batches, at the latest instant any call passed the
 * store. While the store is in use, an idle key is therefore gone at most one ttl after its last use plus
 * one `sweepInterval` — ttl being `capacity / refillPerSecond` for a token bucket, the window for a fixed
 * window, two windows for a sliding window. Once no call comes at all, the sweep has no newer instant and
 * evicts nothing more until the next call (memory does not grow meanwhile); `evictExpired` evicts at the
 * caller's `Clock` (its monotonic reading, as the limiter passes it).
 *
 * Throws `IllegalArgumentException` for a negative or malformed `sweepInterval`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiterStore } from "effect-resilience"
 *
 * const program = Effect.gen(function*() {
 *   const store = yield* RateLimiterStore.makeMemory()
 *   return yield* store.size
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: (options?: MemoryOptions) => Effect.Effect<MemoryStore, never, Scope.Scope> =
  internal.makeMemory

/**
 * A memory store without the background sweep (expired keys still go as new keys arrive, or on
 * `evictExpired`). Useful for benchmarks and synchronous code.
 *
 * @since 0.1.0
 * @category constructors
 */
export const unsafeMakeMemory: () => MemoryStore = internal.unsafeMakeMemory

/**
 * The memory store as a layer, with the default options.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { RateLimiter, RateLimiterStore } from "effect-resilience"
 *
 * const program = Effect.gen(function*() {
 *   const limiter = yield* RateLimiter.tokenBucket({ capacity: 10, refillPerSecond: 5 })
 *   return yield* limiter.tryAcquire("user-42")
 * }).pipe(Effect.provide(RateLimiterStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<RateLimiterStore> = internal.layerMemory

/**
 * The memory store as a layer, with options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryWith: (options: MemoryOptions) => Layer.Layer<RateLimiterStore> = internal.layerMemoryWith
