import type { Fiber } from "effect"
import { Array as Arr, Cause, Clock, Context, Data, Duration, Effect, FiberRef, Metric, MetricLabel } from "effect"
import type { AcquireOptions, Algorithm, Decision, RateLimiter } from "../RateLimiter.js"
import type * as Api from "../RateLimiter.js"
import type { Store, StoreDecision, TokenBucketParams, WindowParams } from "../RateLimiterStore.js"
import { monotonicMillis } from "./clock.js"
import { withDeadline } from "./deadline.js"
import type { Fields } from "./errorFields.js"
import { syncOf } from "./rateLimiterStore/memory.js"
import { type Decider, deciderOf, RateLimiterStore } from "./rateLimiterStore/service.js"
import * as validate from "./validate.js"

export class RateLimited extends Data.TaggedError("RateLimited")<Fields<Api.RateLimited>> {
  override get message(): string {
    return `rate limited (${this.reason}): retry after ${Duration.format(this.retryAfter)}`
  }
}

export const allowedTotal = Metric.counter("effect_resilience_rate_limiter_allowed_total", {
  description: "requests a rate limiter allowed, by algorithm and limiter",
  incremental: true
})
export const deniedTotal = Metric.counter("effect_resilience_rate_limiter_denied_total", {
  description: "requests a rate limiter denied, by algorithm and limiter",
  incremental: true
})

type Params = TokenBucketParams | WindowParams
type SyncOp = (key: string, cost: number, params: any, nowMillis: number) => StoreDecision
type EffectOp = (key: string, cost: number, params: any, nowMillis: number) => Effect.Effect<StoreDecision>

const zero = Duration.zero
const toDuration = (ms: number): Duration.Duration => ms === 0 ? zero : Duration.millis(ms)

/**
 * The limiter itself. Hot-path notes: `tryAcquire` is one `withFiberRuntime` around a synchronous
 * store call when the store is in-process, and around the store's `Decider` (no map step) for Redis; the clock, metric labels and span are read from the fiber
 * directly, and metrics are updated with a tag array built once (Effect caches a metric hook per
 * array identity), so an allowed decision allocates only the decision and its durations.
 */
class Limiter implements RateLimiter {
  private readonly tags: ReadonlyArray<MetricLabel.MetricLabel>
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
    this.tags = [MetricLabel.make("algorithm", algorithm), MetricLabel.make("limiter", name)]
    this.window = Duration.millis(
      "windowMillis" in params ? params.windowMillis : (1000 * params.capacity) / params.refillPerSecond
    )
    const sync = syncOf(store)
    this.decider = deciderOf(store)
    switch (algorithm) {
      case "token-bucket":
        this.syncOp = sync === undefined ? undefined : sync.tokenBucket.bind(sync)
        this.effectOp = store.tokenBucket
        break
      case "fixed-window":
        this.syncOp = sync === undefined ? undefined : sync.fixedWindow.bind(sync)
        this.effectOp = store.fixedWindow
        break
      case "sliding-window":
        this.syncOp = sync === undefined ? undefined : sync.slidingWindow.bind(sync)
        this.effectOp = store.slidingWindow
        break
    }
  }

  tryAcquire(key: string, cost: number = 1): Effect.Effect<Decision> {
    if (cost !== 1 && !(Number.isInteger(cost) && cost >= 1 && cost <= this.limit)) return this.invalidCost(cost)
    return Effect.withFiberRuntime((fiber) => {
      const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
      // an in-process store's buckets and windows live in this process: the monotonic reading, which a step of
      // the wall clock does not move; a shared store compares instants of many processes: their wall clocks
      if (this.syncOp !== undefined) {
        return Effect.succeed(this.record(fiber, this.syncOp(key, cost, this.params, monotonicMillis(clock))))
      }
      const now = clock.unsafeCurrentTimeMillis()
      if (this.decider !== undefined) {
        return this.decider.decide(this.algorithm, key, cost, this.params, now, (d) => this.record(fiber, d))
      }
      return Effect.map(this.effectOp(key, cost, this.params, now), (d) => this.record(fiber, d))
    })
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
        decision.allowed ? Effect.succeed(decision) : withDeadline((deadline, now) => {
          const begun = start === undefined ? now : start
          const wait = Duration.toMillis(decision.retryAfter)
          // an infinite wait exceeds any maxWait, so acquire never sleeps forever
          if (now - begun + wait > maxWait || wait === Infinity) {
            return Effect.fail(new RateLimited({ key, reason: "max-wait", decision, retryAfter: decision.retryAfter }))
          }
          if (deadline !== undefined && now + wait >= deadline) {
            return Effect.fail(new RateLimited({ key, reason: "deadline", decision, retryAfter: decision.retryAfter }))
          }
          return Effect.zipRight(Effect.sleep(decision.retryAfter), this.acquireFrom(key, cost, maxWait, begun))
        })
    )
  }

  private record(fiber: Fiber.RuntimeFiber<unknown, unknown>, d: StoreDecision): Decision {
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    ;(d.allowed ? allowedTotal : deniedTotal).unsafeUpdate(
      1,
      labels.length === 0 ? this.tags : Arr.union(this.tags, labels)
    )
    const span = fiber.currentSpan
    if (span !== undefined && span._tag === "Span") {
      span.attribute("rate_limiter.algorithm", this.algorithm)
      span.attribute("rate_limiter.name", this.name)
      span.attribute("rate_limiter.allowed", d.allowed)
      span.attribute("rate_limiter.remaining", d.remaining)
      span.attribute("rate_limiter.retry_after_ms", d.retryAfterMillis)
      if (d.outage === true) span.attribute("rate_limiter.outage", true)
    }
    const decision: Decision = {
      allowed: d.allowed,
      limit: d.limit,
      remaining: d.remaining,
      retryAfter: toDuration(d.retryAfterMillis),
      resetAfter: toDuration(d.resetAfterMillis)
    }
    // only then: a counted decision keeps exactly the contract's five fields
    return d.outage === true ? { ...decision, outage: true } : decision
  }

  private invalidCost(cost: number): Effect.Effect<never> {
    return Effect.die(
      new Cause.IllegalArgumentException(
        `effect-resilience: RateLimiter "${this.name}" cost must be an integer from 1 to ${this.limit}, got ${cost}`
      )
    )
  }
}

const make = (
  algorithm: Algorithm,
  limit: number,
  params: Params,
  maxWait: number
): Effect.Effect<RateLimiter, never, RateLimiterStore> =>
  Effect.map(
    RateLimiterStore,
    (store): RateLimiter => new Limiter(algorithm, params.name, limit, params, maxWait, store)
  )

const nameOf = (name: string | undefined, fallback: string): string => {
  if (name === undefined) return fallback
  if (typeof name !== "string" || name.length === 0) {
    return validate.invalid("RateLimiter name must be a non-empty string")
  }
  return name
}

const maxWaitOf = (input: Duration.DurationInput | undefined): number =>
  input === undefined ? Infinity : validate.millis("RateLimiter maxWait", input)

/**
 * The longest span (a bucket's time to fill, a window) the limiters accept: instants are epoch milliseconds
 * plus such spans, and must stay exact integers-plus-fractions in a double (and valid Redis expiries).
 * 2^52 ms is about 142,000 years.
 */
const MAX_SPAN_MILLIS = 2 ** 52
/** Shorter windows would give window indices (`now / window`) beyond what a double counts exactly. */
const MIN_WINDOW_MILLIS = 0.001

export const tokenBucket = (options: {
  readonly capacity: number
  readonly refillPerSecond: number
  readonly name?: string
  readonly maxWait?: Duration.DurationInput
}) => {
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
  return make("token-bucket", capacity, params, maxWaitOf(options.maxWait))
}

export const window = (algorithm: "fixed-window" | "sliding-window", options: {
  readonly limit: number
  readonly window: Duration.DurationInput
  readonly name?: string
  readonly maxWait?: Duration.DurationInput
}) => {
  const what = algorithm === "fixed-window" ? "RateLimiter.fixedWindow" : "RateLimiter.slidingWindow"
  const limit = validate.positiveInt(`${what} limit`, options.limit)
  const windowMillis = validate.millis(`${what} window`, options.window, { finite: true })
  if (!(windowMillis >= MIN_WINDOW_MILLIS && windowMillis <= MAX_SPAN_MILLIS)) {
    validate.invalid(`${what} window must be between 1 microsecond and ${MAX_SPAN_MILLIS} ms, got ${windowMillis} ms`)
  }
  const name = nameOf(options.name, `${algorithm}:${limit}:${windowMillis}`)
  const params: WindowParams = { name, limit, windowMillis }
  return make(algorithm, limit, params, maxWaitOf(options.maxWait))
}

export const fixedWindow = (options: Parameters<typeof window>[1]) => window("fixed-window", options)

export const slidingWindow = (options: Parameters<typeof window>[1]) => window("sliding-window", options)
