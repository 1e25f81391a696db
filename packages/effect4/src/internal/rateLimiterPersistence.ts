import { Duration, Effect, Layer } from "effect"
import * as Persisted from "effect/persistence/RateLimiter"
import type { Decision, RateLimiter } from "../RateLimiter.js"
import type { Options } from "../RateLimiter/Persistence.js"
import type { Store } from "../RateLimiterStore.js"
import { inStore, type Spec, tokenBucketSpec, windowSpec } from "./rateLimiter.js"
import { RateLimiterStore } from "./rateLimiterStore/service.js"
import * as validate from "./validate.js"

type ConsumeOptions = Parameters<Persisted.RateLimiter["consume"]>[0]

/** Limiters kept per parameter set; past this many, the cache starts over (they are cheap to build again). */
const MAX_CACHED = 256

const resolve = (options: Options = {}) => {
  const name = options.name ?? "effect-persistence"
  if (typeof name !== "string" || name.length === 0) validate.invalid("RateLimiter/Persistence name must be non-empty")
  const windows = options.windows ?? "fixed-window"
  if (windows !== "fixed-window" && windows !== "sliding-window") {
    validate.invalid(
      `RateLimiter/Persistence windows must be "fixed-window" or "sliding-window", got ${String(windows)}`
    )
  }
  return { name, windows }
}

const exceeded = (key: string, retryAfter: Duration.Duration, limit: number, remaining: number) =>
  new Persisted.RateLimiterError({ reason: new Persisted.RateLimitExceeded({ key, retryAfter, limit, remaining }) })

const storeDown = (name: string) =>
  new Persisted.RateLimiterError({
    reason: new Persisted.RateLimitStoreError({
      message: `effect-resilience RateLimiterStore (limiter "${name}") could not decide: the store is unreachable`
    })
  })

const resultOf = (d: Decision): Persisted.ConsumeResult => ({
  delay: Duration.zero,
  limit: d.limit,
  remaining: d.remaining,
  resetAfter: d.resetAfter
})

const inactive: Persisted.AdaptiveConsumeResult = { delay: Duration.zero, epoch: 0, phase: "inactive" }

export const build = (store: Store, options?: Options): Persisted.RateLimiter => {
  const { name, windows } = resolve(options)
  const limiters = new Map<string, RateLimiter>()

  /**
   * Our limiter for the parameters of one call. Every parameter set of one algorithm has the same name, so a key's
   * counters carry over when `HttpClient.withRateLimiter` changes the limit or window it learned from a response,
   * as they do in Effect's own stores (keyed by key alone).
   */
  const limiterFor = (algorithm: "fixed-window" | "token-bucket", limit: number, windowMillis: number) => {
    const id = `${algorithm}:${limit}:${windowMillis}`
    let limiter = limiters.get(id)
    if (limiter === undefined) {
      const spec: Spec = algorithm === "token-bucket"
        ? tokenBucketSpec({ capacity: limit, refillPerSecond: (limit * 1000) / windowMillis, name: `${name}:tb` })
        : windowSpec(windows, {
          limit,
          window: windowMillis,
          name: `${name}:${windows === "fixed-window" ? "fw" : "sw"}`
        })
      if (limiters.size >= MAX_CACHED) limiters.clear()
      limiter = inStore(store, spec)
      limiters.set(id, limiter)
    }
    return limiter
  }

  const consume = (options: ConsumeOptions): Effect.Effect<Persisted.ConsumeResult, Persisted.RateLimiterError> =>
    Effect.suspend(() => {
      const { key } = options
      // as Effect's own limiter: at least one millisecond; a limit learned from a response header may be fractional,
      // so it is rounded down (never admit more than the server said), and a fractional cost up
      const windowMillis = Math.max(
        1,
        validate.millis("RateLimiter/Persistence window", options.window, { finite: true })
      )
      if (!(typeof options.limit === "number" && options.limit > 0)) {
        validate.invalid(`RateLimiter/Persistence limit must be a number > 0, got ${options.limit}`)
      }
      const limit = Math.max(1, Math.floor(options.limit))
      const requested = options.tokens ?? 1
      if (!(typeof requested === "number" && requested > 0 && Number.isFinite(requested))) {
        validate.invalid(`RateLimiter/Persistence tokens must be a finite number > 0, got ${requested}`)
      }
      const tokens = Math.ceil(requested)
      // never admissible: Effect's own limiter fails such a call with the window as its wait, and so does this
      if (tokens > limit) return Effect.fail(exceeded(key, Duration.millis(windowMillis), limit, 0))
      const limiter = limiterFor(options.algorithm ?? "fixed-window", limit, windowMillis)
      if (options.onExceeded === "delay") {
        // our limiters reserve nothing ahead: the call waits here (on the Clock, within the fiber's deadline) until
        // it is admitted, then reports no further delay
        return limiter.acquire(key, tokens).pipe(
          Effect.map(resultOf),
          Effect.catchTag("RateLimited", (e) => Effect.fail(exceeded(key, e.retryAfter, limit, e.decision.remaining)))
        )
      }
      return Effect.flatMap(limiter.tryAcquire(key, tokens), (d) =>
        d.allowed
          ? Effect.succeed(resultOf(d))
          : d.outage === true
          ? Effect.fail(storeDown(name))
          : Effect.fail(exceeded(key, d.retryAfter, limit, d.remaining)))
    })

  return {
    [Persisted.TypeId]: Persisted.TypeId,
    consume,
    // learning a server's limit from 429 feedback is Effect's store's own feature: this store keeps no adaptive
    // state, which Effect's contract answers with "inactive" and a zero delay (a 429's Retry-After still applies)
    adaptiveConsume: () => Effect.succeed(inactive),
    adaptiveFeedback: () => Effect.void
  }
}

export const make = (options?: Options): Effect.Effect<Persisted.RateLimiter, never, RateLimiterStore> => {
  resolve(options)
  return Effect.map(RateLimiterStore, (store) => build(store, options))
}

export const layer = (options?: Options): Layer.Layer<Persisted.RateLimiter, never, RateLimiterStore> => {
  resolve(options)
  return Layer.effect(Persisted.RateLimiter, make(options))
}
