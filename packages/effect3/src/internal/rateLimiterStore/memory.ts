import { MemoryCore } from "@effect-resilience/core/rateLimiterTables"
import type { Scope } from "effect"
import { Effect, Layer } from "effect"

export type { SyncOp } from "@effect-resilience/core/rateLimiterTables"
import type { MemoryOptions, MemoryStore, Store } from "../../RateLimiterStore.js"
import { currentMonotonicMillis } from "../clock.js"
import * as validate from "../validate.js"
import { RateLimiterStore } from "./service.js"

/** Entries the background sweep evicts before yielding to other fibers. */
export const SWEEP_BATCH = 4096

const sweepAt = (core: MemoryCore, now: number): Effect.Effect<void> =>
  core.evictExpired(now, SWEEP_BATCH) < SWEEP_BATCH
    ? Effect.void
    : Effect.zipRight(Effect.yieldNow(), Effect.suspend(() => sweepAt(core, now)))

/**
 * The background sweep, yielding between batches so a large sweep never stalls other fibers. It evicts what
 * has expired at the callers' time: the latest instant they passed, moved forward by the time the sweeper's
 * own clock has seen pass since that instant last changed. While callers are active that is exactly their
 * latest instant (whatever clock they use); when they all go idle, their time still advances, so idle keys
 * are evicted and memory returns to baseline. Only elapsed time is taken from the sweeper's clock, so a
 * callers' clock that is merely offset from it (a `TestClock` inside, the layer provided outside) is fine.
 * Like the limiter's, its time is the monotonic reading of the `Clock` (`internal/clock.ts`).
 */
export const sweeper = (core: MemoryCore): Effect.Effect<void> => {
  let seenLatest = -Infinity
  let seenAt = 0
  return Effect.flatMap(currentMonotonicMillis, (now) =>
    Effect.suspend(() => {
      if (core.latest !== seenLatest) {
        seenLatest = core.latest
        seenAt = now
      }
      return sweepAt(core, seenLatest + (now - seenAt))
    }))
}

/**
 * `MemoryStore.evictExpired`: the same, or at the `Clock` time of the fiber running it when that is later
 * — an explicit "evict what has expired by now", asked by a caller, on the caller's clock.
 */
export const evictExpired = (core: MemoryCore): Effect.Effect<void> =>
  Effect.flatMap(currentMonotonicMillis, (now) => Effect.suspend(() => sweepAt(core, Math.max(now, core.latest))))

/**
 * The synchronous operations behind in-process stores, found by the limiter to save one effect per
 * decision. Kept here rather than on `Store`, so a store written by a user is only its three operations.
 */
const syncStores = new WeakMap<Store, MemoryCore>()

/** The synchronous operations of `store`, when it is an in-process store of this library. */
export const syncOf = (store: Store): MemoryCore | undefined => syncStores.get(store)

export const toStore = (core: MemoryCore): MemoryStore => {
  const store: MemoryStore = {
    tokenBucket: (key, cost, params, nowMillis) => Effect.sync(() => core.tokenBucket(key, cost, params, nowMillis)),
    fixedWindow: (key, cost, params, nowMillis) => Effect.sync(() => core.fixedWindow(key, cost, params, nowMillis)),
    slidingWindow: (key, cost, params, nowMillis) =>
      Effect.sync(() => core.slidingWindow(key, cost, params, nowMillis)),
    sync: core,
    size: Effect.sync(() => core.size()),
    unsafeSize: () => core.size(),
    evictExpired: evictExpired(core)
  }
  syncStores.set(store, core)
  return store
}

/**
 * A memory store with a background sweep every `intervalMillis` (none when infinite), for the scope's life.
 * The interval is slept on the clock of the fiber building the store; what is expired is decided by the
 * callers' instants only (see `Table`).
 */
export const make = (intervalMillis: number): Effect.Effect<MemoryStore, never, Scope.Scope> =>
  // a new core per run: `layerMemory` is one value, built anew (with its own keys) every time it is provided
  Effect.suspend(() => {
    const core = new MemoryCore()
    const store = toStore(core)
    if (!Number.isFinite(intervalMillis)) return Effect.succeed(store)
    return Effect.as(
      Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(intervalMillis), sweeper(core)))),
      store
    )
  })

const sweepMillis = (options?: MemoryOptions): number =>
  options?.sweepInterval === undefined ? 1000 : validate.millis("RateLimiterStore sweepInterval", options.sweepInterval)

export const makeMemory = (options?: MemoryOptions): Effect.Effect<MemoryStore, never, Scope.Scope> =>
  make(sweepMillis(options))

export const unsafeMakeMemory = (): MemoryStore => toStore(new MemoryCore())

export const layerMemory: Layer.Layer<RateLimiterStore> = Layer.scoped(RateLimiterStore, make(1000))

export const layerMemoryWith = (options: MemoryOptions): Layer.Layer<RateLimiterStore> => {
  const interval = sweepMillis(options) // validated when called
  return Layer.scoped(RateLimiterStore, make(interval))
}
