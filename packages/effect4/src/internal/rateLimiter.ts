import type { Fiber } from "effect"
import { Cause, Clock, Data, Duration, Effect, Metric } from "effect"
import type { AcquireOptions, Algorithm, Decision, RateLimiter } from "../RateLimiter.js"
import type * as Api from "../RateLimiter.js"
import type { Store, StoreDecision, TokenBucketParams, WindowParams } from "../RateLimiterStore.js"
import { monotonicMillisOf } from "./clock.js"
import { withDeadline } from "./deadline.js"
import type { Fields } from "./errorFields.js"
import * as Meter from "./metrics.js"
import { counterWith } from "./metrics.js"
import { syncOf, type SyncOp } from "./rateLimiterStore/memory.js"
import { type Decider, deciderOf, RateLimiterStore } from "./rateLimiterStore/service.js"
import { histogramWith, rateLimiterWait } from "./telemetry.js"
import { eventUnsafe } from "./trace.js"
import * as validate from "./validate.js"

export class RateLimited extends Data.TaggedError("RateLimited")<Fields<Api.RateLimited>> {
  override get message(): string {
    return `rate limited (${this.reason}): retry after ${Duration.format(this.retryAfter)}`
  }
}

export const allowedTotal = Meter.counter("effect_resilience_rate_limiter_allowed_total", {
  description: "requests a rate limiter allowed, by algorithm and limiter",
  incremental: true
})
export const deniedTotal = Meter.counter("effect_resilience_rate_limiter_denied_total", {
  description: "requests a rate limiter denied, by algorithm and limiter",
  incremental: true
})

type Params = TokenBucketParams | WindowParams
type EffectOp = (key: string, cost: number, params: any, nowMillis: number) => Effect.Effect<StoreDecision>

const zero = Duration.zero
const toDuration = (ms: number): Duration.Duration => ms === 0 ? zero : Duration.millis(ms)

/**
 * The limiter itself. Hot-path notes: `tryAcquire` is one `withFiberSucceed` around a synchronous store call when
 * the store is in-process; the clock and the span are read from the fiber directly, and the counters are built once
 * with the limiter's attributes, updated with the fiber's context (its registry and `CurrentMetricAttributes`,
 * which Effect merges once per attribute set), so an allowed decision allocates only the decision and, when it
 * is not the last one's, its `resetAfter`; the store's table is found once per limiter (`MemoryCore.decider`).
 */
class Limiter implements RateLimiter {
  private readonly allowed: Metric.Counter<number>
  private readonly denied: Metric.Counter<number>
  /** `effect_resilience_rate_limiter_wait_seconds`: how long an `acquire` that waited waited. */
  private readonly waited: Metric.Histogram<number>
  private readonly syncOp: SyncOp | undefined
  private readonly effectOp: EffectOp
  private readonly decider: Decider | undefined
  readonly window: Duration.Duration

  constructor(
    readonly algorithm: Algorithm,
    readonly name: string,
    readonly limit: number,
    private readonly params: Params,
    private readonly maxWait: number,
    store: Store
  ) {
    const attributes = { algorithm, limiter: name }
    this.allowed = counterWith(allowedTotal, attributes)
    this.denied = counterWith(deniedTotal, attributes)
    this.waited = histogramWith(rateLimiterWait, attributes)
    this.window = Duration.millis(
      "windowMillis" in params ? params.windowMillis : (1000 * params.capacity) / params.refillPerSecond
    )
    this.syncOp = syncOf(store)?.decider(algorithm, params.name)
    this.decider = deciderOf(store)
    switch (algorithm) {
      case "token-bucket":
        this.effectOp = store.tokenBucket
        break
      case "fixed-window":
        this.effectOp = store.fixedWindow
        break
      case "sliding-window":
        this.effectOp = store.slidingWindow
        break
    }
  }

  tryAcquire(key: string, cost: number = 1): Effect.Effect<Decision> {
    if (cost !== 1 && !(Number.isInteger(cost) && cost >= 1 && cost <= this.limit)) return this.invalidCost(cost)
    const syncOp = this.syncOp
    // an in-process store decides in one step, which hands the decision straight to the caller's continuation;
    // its buckets and windows live in this process: the monotonic reading, which a step of the wall clock does
    // not move (a shared store, below, compares instants of many processes: their wall clocks)
    if (syncOp !== undefined) {
      return Effect.withFiberSucceed((fiber) =>
        this.record(fiber, syncOp(key, cost, this.params, monotonicMillisOf(fiber)))
      )
    }
    const decider = this.decider
    // a network store of this library hands its answer to `record` in the step that resumes the fiber
    if (decider !== undefined) {
      return Effect.withFiber((fiber) =>
        decider.decide(
          this.algorithm,
          key,
          cost,
          this.params,
          fiber.getRef(Clock.Clock).currentTimeMillisUnsafe(),
          (d) => this.record(fiber, d)
        )
      )
    }
    return Effect.withFiber((fiber) =>
      Effect.map(
        this.effectOp(key, cost, this.params, fiber.getRef(Clock.Clock).currentTimeMillisUnsafe()),
        (d) => this.record(fiber, d)
      )
    )
  }

  acquire(key: string, cost: number = 1, options?: AcquireOptions): Effect.Effect<Decision, RateLimited> {
    const maxWait = options?.maxWait === undefined
      ? this.maxWait
      : validate.millis("RateLimiter acquire maxWait", options.maxWait)
    return this.acquireFrom(key, cost, maxWait, undefined)
  }

  private acquireFrom(
    key: string,
    cost: number,
    maxWait: number,
    start: number | undefined
  ): Effect.Effect<Decision, RateLimited> {
    return Effect.flatMap(
      this.tryAcquire(key, cost),
      (decision) =>
        decision.allowed
          ? start === undefined
            ? Effect.succeed(decision)
            : withDeadline((_, now) => Effect.as(Metric.update(this.waited, (now - start) / 1000), decision))
          : withDeadline((deadline, now) => {
            const begun = start === undefined ? now : start
            const wait = Duration.toMillis(decision.retryAfter)
            // an infinite wait exceeds any maxWait, so acquire never sleeps forever
            if (now - begun + wait > maxWait || wait === Infinity) {
              return Effect.fail(
                new RateLimited({ key, reason: "max-wait", decision, retryAfter: decision.retryAfter })
              )
            }
            if (deadline !== undefined && now + wait >= deadline) {
              return Effect.fail(
                new RateLimited({ key, reason: "deadline", decision, retryAfter: decision.retryAfter })
              )
            }
            return Effect.andThen(Effect.sleep(decision.retryAfter), this.acquireFrom(key, cost, maxWait, begun))
          })
    )
  }

  // The last `resetAfter` given, given again while it repeats (a bucket that is full, or nearly, between calls
  // resets after the same time on every call): a Duration is an immutable value.
  private lastResetMillis = 0
  private lastReset: Duration.Duration = zero

  private resetAfter(ms: number): Duration.Duration {
    if (ms !== this.lastResetMillis) {
      this.lastReset = toDuration(ms)
      this.lastResetMillis = ms
    }
    return this.lastReset
  }

  private record(fiber: Fiber.Fiber<unknown, unknown>, d: StoreDecision): Decision {
    ;(d.allowed ? this.allowed : this.denied).updateUnsafe(1, fiber.context)
    const span = fiber.cache.span
    if (span !== undefined && span._tag === "Span" && span.status._tag !== "Ended") {
      span.attribute("rate_limiter.algorithm", this.algorithm)
      span.attribute("rate_limiter.name", this.name)
      span.attribute("rate_limiter.allowed", d.allowed)
      span.attribute("rate_limiter.remaining", d.remaining)
      span.attribute("rate_limiter.retry_after_ms", d.retryAfterMillis)
      if (d.outage === true) span.attribute("rate_limiter.outage", true)
      if (!d.allowed) {
        // an attribute keeps the last decision only: a refusal is an event too, for each time it happens
        eventUnsafe(fiber.context, "RateLimiter.denied", () => ({
          "rate_limiter.name": this.name,
          "rate_limiter.algorithm": this.algorithm,
          "rate_limiter.remaining": d.remaining,
          "rate_limiter.retry_after_ms": d.retryAfterMillis
        }))
      }
    }
    const decision: Decision = {
      allowed: d.allowed,
      limit: d.limit,
      remaining: d.remaining,
      retryAfter: toDuration(d.retryAfterMillis),
      resetAfter: this.resetAfter(d.resetAfterMillis)
    }
    // only then: a counted decision keeps exactly the contract's five fields
    return d.outage === true ? { ...decision, outage: true } : decision
  }

  private invalidCost(cost: number): Effect.Effect<never> {
    return Effect.die(
      new Cause.IllegalArgumentError(
        `effect-resilience: RateLimiter "${this.name}" cost must be an integer from 1 to ${this.limit}, got ${cost}`
      )
    )
  }
}

/** A limiter's validated options. */
export interface Spec {
  readonly algorithm: Algorithm
  readonly limit: number
  readonly params: Params
  readonly maxWait: number
}

/** The limiter `spec` describes, over `store` (the constructors take the store from the context). */
export const inStore = (store: Store, { algorithm, limit, maxWait, params }: Spec): RateLimiter =>
  new Limiter(algorithm, params.name, limit, params, maxWait, store)

const make = (spec: Spec): Effect.Effect<RateLimiter, never, RateLimiterStore> =>
  Effect.map(RateLimiterStore, (store) => inStore(store, spec))

const nameOf = (name: string | undefined, fallback: string): string => {
  if (name === undefined) return fallback
  if (typeof name !== "string" || name.length === 0) {
    return validate.invalid("RateLimiter name must be a non-empty string")
  }
  return name
}

const maxWaitOf = (input: Duration.Input | undefined): number =>
  input === undefined ? Infinity : validate.millis("RateLimiter maxWait", input)

/**
 * The longest span (a bucket's time to fill, a window) the limiters accept: instants are epoch milliseconds
 * plus such spans, and must stay exact integers-plus-fractions in a double (and valid Redis expiries).
 * 2^52 ms is about 142,000 years.
 */
const MAX_SPAN_MILLIS = 2 ** 52
/** Shorter windows would give window indices (`now / window`) beyond what a double counts exactly. */
const MIN_WINDOW_MILLIS = 0.001

export const tokenBucketSpec = (options: {
  readonly capacity: number
  readonly refillPerSecond: number
  readonly name?: string
  readonly maxWait?: Duration.Input
}): Spec => {
  const capacity = validate.positiveInt("RateLimiter.tokenBucket capacity", options.capacity)
  const refillPerSecond = validate.positive("RateLimiter.tokenBucket refillPerSecond", options.refillPerSecond)
  if (!((capacity * 1000) / refillPerSecond <= MAX_SPAN_MILLIS)) {
    validate.invalid(
      `RateLimiter.tokenBucket: refilling ${capacity} tokens at ${refillPerSecond}/s takes longer than the arithmetic ` +
        `of instants can hold (${MAX_SPAN_MILLIS} ms)`
    )
  }
  const name = nameOf(options.name, `token-bucket:${capacity}:${refillPerSecond}`)
  const params: TokenBucketParams = { name, capacity, refillPerSecond }
  return { algorithm: "token-bucket", limit: capacity, params, maxWait: maxWaitOf(options.maxWait) }
}

export const windowSpec = (algorithm: "fixed-window" | "sliding-window", options: {
  readonly limit: number
  readonly window: Duration.Input
  readonly name?: string
  readonly maxWait?: Duration.Input
}): Spec => {
  const what = algorithm === "fixed-window" ? "RateLimiter.fixedWindow" : "RateLimiter.slidingWindow"
  const limit = validate.positiveInt(`${what} limit`, options.limit)
  const windowMillis = validate.millis(`${what} window`, options.window, { finite: true })
  if (!(windowMillis >= MIN_WINDOW_MILLIS && windowMillis <= MAX_SPAN_MILLIS)) {
    validate.invalid(`${what} window must be between 1 microsecond and ${MAX_SPAN_MILLIS} ms, got ${windowMillis} ms`)
  }
  const name = nameOf(options.name, `${algorithm}:${limit}:${windowMillis}`)
  const params: WindowParams = { name, limit, windowMillis }
  return { algorithm, limit, params, maxWait: maxWaitOf(options.maxWait) }
}

export const tokenBucket = (options: Parameters<typeof tokenBucketSpec>[0]) => make(tokenBucketSpec(options))

export const fixedWindow = (options: Parameters<typeof windowSpec>[1]) => make(windowSpec("fixed-window", options))

export const slidingWindow = (options: Parameters<typeof windowSpec>[1]) => make(windowSpec("sliding-window", options))
