import type { Scope } from "effect"
import { Clock, Effect, Layer } from "effect"
import * as RateWindows from "../../core/rateWindows.js"
import * as TokenBucket from "../../core/tokenBucket.js"
import type { Algorithm } from "../../RateLimiter.js"
import type {
  MemoryOptions,
  MemoryStore,
  Store,
  StoreDecision,
  SyncStore,
  TokenBucketParams,
  WindowParams
} from "../../RateLimiterStore.js"
import * as validate from "../validate.js"
import { RateLimiterStore } from "./service.js"

/** Expired entries evicted from the front of a table per new key: more than one, so eviction outpaces growth. */
export const EVICT_PER_INSERT = 2
/** Entries the background sweep evicts before yielding to other fibers. */
export const SWEEP_BATCH = 4096

/** A key's state plus its place in its table's recency list. */
class Entry<S> {
  prev: Entry<S> | undefined = undefined
  next: Entry<S> | undefined = undefined
  constructor(readonly key: string, public state: S, public expiresAt: number) {}
}

/** One limiter's synchronous decision: `params` are that limiter's (see `MemoryCore.decider`). */
export type SyncOp = (
  key: string,
  cost: number,
  params: TokenBucketParams | WindowParams,
  nowMillis: number
) => StoreDecision

/** One decision of the pure core (`core/tokenBucket.ts`, `core/rateWindows.ts`). */
type Step<S, P> = (
  state: S,
  cost: number,
  params: P,
  now: number
) => { readonly decision: StoreDecision; readonly state: S; readonly expiresAt: number }

/**
 * The keys of one limiter (one algorithm and name), in a hash map for lookup and an intrusive
 * doubly-linked list in order of last use. Within a table every state expires at most one "ttl"
 * (`capacity / refillPerSecond`, the window, or two windows) after its last use, so the list is
 * also ordered by an upper bound of expiry: evicting from the front and stopping at the first live
 * entry never skips an entry older than that bound. Each call does O(1) list work; each key is
 * evicted once, so eviction is O(1) amortised per inserted key — never a scan of all keys.
 */
class Table<S> {
  readonly entries = new Map<string, Entry<S>>()
  head: Entry<S> | undefined = undefined
  tail: Entry<S> | undefined = undefined

  constructor(readonly fresh: S) {}

  run<P>(step: Step<S, P>, key: string, cost: number, params: P, now: number): StoreDecision {
    const e = this.entries.get(key)
    if (e !== undefined) {
      const r = step(e.state, cost, params, now)
      e.state = r.state
      e.expiresAt = r.expiresAt
      if (e !== this.tail) {
        this.unlink(e)
        this.append(e)
      }
      return r.decision
    }
    const r = step(this.fresh, cost, params, now)
    // a denial changes nothing, and a state already expired is a fresh key: neither costs memory
    if (r.decision.allowed && r.expiresAt > now) {
      this.evict(now, EVICT_PER_INSERT)
      const added = new Entry(key, r.state, r.expiresAt)
      this.entries.set(key, added)
      this.append(added)
    }
    return r.decision
  }

  /** Evicts up to `max` expired entries from the front; returns how many. */
  evict(now: number, max: number): number {
    let n = 0
    let e = this.head
    while (e !== undefined && n < max && e.expiresAt <= now) {
      const next = e.next
      this.entries.delete(e.key)
      e.next = undefined
      n++
      e = next
    }
    this.head = e
    if (e === undefined) this.tail = undefined
    else e.prev = undefined
    return n
  }

  private unlink(e: Entry<S>): void {
    if (e.prev === undefined) this.head = e.next
    else e.prev.next = e.next
    if (e.next === undefined) this.tail = e.prev
    else e.next.prev = e.prev
    e.prev = e.next = undefined
  }

  private append(e: Entry<S>): void {
    e.prev = this.tail
    if (this.tail === undefined) this.head = e
    else this.tail.next = e
    this.tail = e
  }
}

const tableOf = <S>(tables: Map<string, Table<S>>, name: string, fresh: S): Table<S> => {
  let t = tables.get(name)
  if (t === undefined) {
    t = new Table(fresh)
    tables.set(name, t)
  }
  return t
}

/**
 * The synchronous core of the memory store: one table per algorithm and limiter name.
 *
 * Decisions never read a clock: `latest` is the largest `nowMillis` any operation passed, and the
 * background sweep (see `sweeper`) evicts at the callers' time derived from it. (Sweeping at the sweep
 * fiber's own clock would evict live keys — silently resetting their limits — whenever the callers' clock
 * is another one, e.g. a `TestClock` inside, the layer provided outside.)
 */
export class MemoryCore implements SyncStore {
  private readonly buckets = new Map<string, Table<number>>()
  private readonly fixed = new Map<string, Table<RateWindows.State>>()
  private readonly sliding = new Map<string, Table<RateWindows.State>>()
  latest = -Infinity

  tokenBucket(key: string, cost: number, params: TokenBucketParams, nowMillis: number): StoreDecision {
    if (nowMillis > this.latest) this.latest = nowMillis
    return tableOf(this.buckets, params.name, TokenBucket.fresh).run(TokenBucket.take, key, cost, params, nowMillis)
  }

  fixedWindow(key: string, cost: number, params: WindowParams, nowMillis: number): StoreDecision {
    if (nowMillis > this.latest) this.latest = nowMillis
    return tableOf(this.fixed, params.name, RateWindows.fresh).run(
      RateWindows.fixedWindow,
      key,
      cost,
      params,
      nowMillis
    )
  }

  slidingWindow(key: string, cost: number, params: WindowParams, nowMillis: number): StoreDecision {
    if (nowMillis > this.latest) this.latest = nowMillis
    const table = tableOf(this.sliding, params.name, RateWindows.fresh)
    return table.run(RateWindows.slidingWindow, key, cost, params, nowMillis)
  }

  /**
   * The operation of one limiter (`algorithm`, named `name`: the `params.name` it will be passed), its table
   * found once here rather than by name on every decision. A table, once made, is never dropped.
   */
  decider(algorithm: Algorithm, name: string): SyncOp {
    switch (algorithm) {
      case "token-bucket": {
        const table = tableOf(this.buckets, name, TokenBucket.fresh)
        return (key, cost, params, nowMillis) => {
          if (nowMillis > this.latest) this.latest = nowMillis
          return table.run(TokenBucket.take, key, cost, params as TokenBucketParams, nowMillis)
        }
      }
      case "fixed-window": {
        const table = tableOf(this.fixed, name, RateWindows.fresh)
        return (key, cost, params, nowMillis) => {
          if (nowMillis > this.latest) this.latest = nowMillis
          return table.run(RateWindows.fixedWindow, key, cost, params as WindowParams, nowMillis)
        }
      }
      case "sliding-window": {
        const table = tableOf(this.sliding, name, RateWindows.fresh)
        return (key, cost, params, nowMillis) => {
          if (nowMillis > this.latest) this.latest = nowMillis
          return table.run(RateWindows.slidingWindow, key, cost, params as WindowParams, nowMillis)
        }
      }
    }
  }

  /** Keys held, over all limiters. */
  size(): number {
    let n = 0
    for (const tables of [this.buckets, this.fixed, this.sliding]) {
      for (const t of tables.values()) n += t.entries.size
    }
    return n
  }

  /** Evicts up to `max` keys expired at `nowMillis` over all tables; returns how many. */
  evictExpired(nowMillis: number, max: number): number {
    let n = 0
    for (const tables of [this.buckets, this.fixed, this.sliding]) {
      for (const t of tables.values()) {
        if (n >= max) return n
        n += t.evict(nowMillis, max - n)
      }
    }
    return n
  }
}

const sweepAt = (core: MemoryCore, now: number): Effect.Effect<void> =>
  core.evictExpired(now, SWEEP_BATCH) < SWEEP_BATCH
    ? Effect.void
    : Effect.andThen(Effect.yieldNow, Effect.suspend(() => sweepAt(core, now)))

/**
 * The background sweep, yielding between batches so a large sweep never stalls other fibers. It evicts what
 * has expired at the callers' time: the latest instant they passed, moved forward by the time the sweeper's
 * own clock has seen pass since that instant last changed. While callers are active that is exactly their
 * latest instant (whatever clock they use); when they all go idle, their time still advances, so idle keys
 * are evicted and memory returns to baseline. Only elapsed time is taken from the sweeper's clock, so a
 * callers' clock that is merely offset from it (a `TestClock` inside, the layer provided outside) is fine.
 */
export const sweeper = (core: MemoryCore): Effect.Effect<void> => {
  let seenLatest = -Infinity
  let seenAt = 0
  return Effect.flatMap(Clock.currentTimeMillis, (now) =>
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
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.suspend(() => sweepAt(core, Math.max(now, core.latest))))

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
      Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(intervalMillis), sweeper(core)))),
      store
    )
  })

const sweepMillis = (options?: MemoryOptions): number =>
  options?.sweepInterval === undefined ? 1000 : validate.millis("RateLimiterStore sweepInterval", options.sweepInterval)

export const makeMemory = (options?: MemoryOptions): Effect.Effect<MemoryStore, never, Scope.Scope> =>
  make(sweepMillis(options))

export const unsafeMakeMemory = (): MemoryStore => toStore(new MemoryCore())

export const layerMemory: Layer.Layer<RateLimiterStore> = Layer.effect(RateLimiterStore, make(1000))

export const layerMemoryWith = (options: MemoryOptions): Layer.Layer<RateLimiterStore> => {
  const interval = sweepMillis(options) // validated when called
  return Layer.effect(RateLimiterStore, make(interval))
}
