/**
 * The memory rate-limit store's keys, without effects (the editions' `internal/rateLimiterStore/memory.ts` add
 * the sweep fiber, the `Store` of effects and the layers): one table per algorithm and limiter name, each a hash
 * map plus a recency list, evicted from the front as new keys arrive and by the sweep.
 */
import type { Decision } from "./rateLimit.js"
import * as RateWindows from "./rateWindows.js"
import * as TokenBucket from "./tokenBucket.js"

/** A token bucket limiter's parameters, with the limiter's name (which table its keys live in). */
export interface TokenBucketParams extends TokenBucket.Params {
  readonly name: string
}

/** A fixed or sliding window limiter's parameters, with the limiter's name. */
export interface WindowParams extends RateWindows.Params {
  readonly name: string
}

/** The three algorithms (the editions' `RateLimiter.Algorithm`). */
export type Algorithm = "token-bucket" | "fixed-window" | "sliding-window"

/** One limiter's synchronous decision: `params` are that limiter's (see `MemoryCore.decider`). */
export type SyncOp = (
  key: string,
  cost: number,
  params: TokenBucketParams | WindowParams,
  nowMillis: number
) => Decision

/** Expired entries evicted from the front of a table per new key: more than one, so eviction outpaces growth. */
export const EVICT_PER_INSERT = 2

/**
 * A key's state plus its place in its table's recency list. The numbers live in fields of their own,
 * declared as numbers (not `undefined` first), so V8 keeps them as doubles updated in place: a decision
 * then stores no new object into an entry. (A field holding a fresh number or state object per decision
 * made every entry point at a young object, and every scavenge copied one per key touched since the
 * last: at 100k keys, most of the decision's time went to the garbage collector.)
 */
abstract class Entry<S> {
  prev: Entry<S> | undefined = undefined
  next: Entry<S> | undefined = undefined
  expiresAt = 0
  constructor(readonly key: string) {}
  abstract get(): S
  abstract set(state: S): void
}

/** A token bucket's key: its state is the instant the bucket is full again. */
class BucketEntry extends Entry<number> {
  fullAt = 0
  get(): number {
    return this.fullAt
  }
  set(state: number): void {
    this.fullAt = state
  }
}

/** A window's key: the entry is its own state (the step reads it and returns a new one, copied back). */
class WindowEntry extends Entry<RateWindows.State> implements RateWindows.State {
  start = 0
  current = 0
  previous = 0
  get(): RateWindows.State {
    return this
  }
  set(state: RateWindows.State): void {
    this.start = state.start
    this.current = state.current
    this.previous = state.previous
  }
}

/** One decision of the pure core (`core/tokenBucket.ts`, `core/rateWindows.ts`). */
type Step<S, P> = (
  state: S,
  cost: number,
  params: P,
  now: number
) => { readonly decision: Decision; readonly state: S; readonly expiresAt: number }

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

  constructor(readonly fresh: S, private readonly entry: (key: string) => Entry<S>) {}

  run<P>(step: Step<S, P>, key: string, cost: number, params: P, now: number): Decision {
    const e = this.entries.get(key)
    if (e !== undefined) {
      const r = step(e.get(), cost, params, now)
      e.set(r.state)
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
      const added = this.entry(key)
      added.set(r.state)
      added.expiresAt = r.expiresAt
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

const bucketEntry = (key: string): Entry<number> => new BucketEntry(key)
const windowEntry = (key: string): Entry<RateWindows.State> => new WindowEntry(key)

/** One algorithm's tables, by limiter name, and how its keys are made and decided. */
class Tables<S, P> {
  readonly byName = new Map<string, Table<S>>()

  constructor(readonly fresh: S, readonly entry: (key: string) => Entry<S>, readonly step: Step<S, P>) {}

  /** The table of the limiter named `name`; once made, a table is never dropped. */
  of(name: string): Table<S> {
    let t = this.byName.get(name)
    if (t === undefined) {
      t = new Table(this.fresh, this.entry)
      this.byName.set(name, t)
    }
    return t
  }
}

/**
 * The synchronous core of the memory store: one table per algorithm and limiter name.
 *
 * Decisions never read a clock: `latest` is the largest `nowMillis` any operation passed, and the
 * background sweep (the editions' `sweeper`) evicts at the callers' time derived from it. (Sweeping at the sweep
 * fiber's own clock would evict live keys — silently resetting their limits — whenever the callers' clock
 * is another one, e.g. a `TestClock` inside, the layer provided outside.)
 */
export class MemoryCore {
  private readonly buckets = new Tables<number, TokenBucket.Params>(TokenBucket.fresh, bucketEntry, TokenBucket.take)
  private readonly fixed = new Tables(RateWindows.fresh, windowEntry, RateWindows.fixedWindow)
  private readonly sliding = new Tables(RateWindows.fresh, windowEntry, RateWindows.slidingWindow)
  latest = -Infinity

  private decide<S, P>(
    tables: Tables<S, P>,
    key: string,
    cost: number,
    params: P & { readonly name: string },
    nowMillis: number
  ): Decision {
    if (nowMillis > this.latest) this.latest = nowMillis
    return tables.of(params.name).run(tables.step, key, cost, params, nowMillis)
  }

  tokenBucket(key: string, cost: number, params: TokenBucketParams, nowMillis: number): Decision {
    return this.decide(this.buckets, key, cost, params, nowMillis)
  }

  fixedWindow(key: string, cost: number, params: WindowParams, nowMillis: number): Decision {
    return this.decide(this.fixed, key, cost, params, nowMillis)
  }

  slidingWindow(key: string, cost: number, params: WindowParams, nowMillis: number): Decision {
    return this.decide(this.sliding, key, cost, params, nowMillis)
  }

  /**
   * The operation of one limiter (`algorithm`, named `name`: the `params.name` it will be passed), its table
   * found once here rather than by name on every decision.
   */
  decider(algorithm: Algorithm, name: string): SyncOp {
    switch (algorithm) {
      case "token-bucket":
        return this.opOf(this.buckets, name)
      case "fixed-window":
        return this.opOf(this.fixed, name)
      case "sliding-window":
        return this.opOf(this.sliding, name)
    }
  }

  private opOf<S, P>(tables: Tables<S, P>, name: string): SyncOp {
    const table = tables.of(name)
    const step = tables.step
    return (key, cost, params, nowMillis) => {
      if (nowMillis > this.latest) this.latest = nowMillis
      return table.run(step, key, cost, params as P, nowMillis)
    }
  }

  /** Keys held, over all limiters. */
  size(): number {
    let n = 0
    for (const tables of [this.buckets, this.fixed, this.sliding]) {
      for (const t of tables.byName.values()) n += t.entries.size
    }
    return n
  }

  /** Evicts up to `max` keys expired at `nowMillis` over all tables; returns how many. */
  evictExpired(nowMillis: number, max: number): number {
    let n = 0
    for (const tables of [this.buckets, this.fixed, this.sliding]) {
      for (const t of tables.byName.values()) {
        if (n >= max) return n
        n += t.evict(nowMillis, max - n)
      }
    }
    return n
  }
}
