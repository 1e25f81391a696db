/**
 * The Redis rate-limit store: the scripts of `core/rateLimiterScript.ts` (key layout, arguments and replies are
 * documented there), one `EVALSHA` per decision.
 *
 * Time is the `nowMillis` the limiter passes (the caller's `Clock`), as in the memory store. A key is written
 * only when a request is admitted (a denial changes nothing, as in memory), with a `PX` of its natural ttl — the
 * time until it is indistinguishable from a fresh key — plus `expiryMargin`, so an idle key goes away on its own
 * and a process whose clock is a little behind still finds it.
 */
import * as lua from "@effect-resilience/core/rateLimiterScript"
import { Effect, Layer } from "effect"
import type { Algorithm } from "../../RateLimiter.js"
import type { Store, StoreDecision, TokenBucketParams, WindowParams } from "../../RateLimiterStore.js"
import * as redis from "../redis/client.js"
import {
  checkConnection,
  type RateLimiterOptions,
  type ResolvedRateLimiter,
  resolveRateLimiter
} from "../redis/options.js"
import { outagePolicy } from "./outage.js"
import { RateLimiterStore, withDecider } from "./service.js"

export type Options = redis.ClientOptions & RateLimiterOptions

const tokenBucketScript = redis.script(lua.scripts.tb)
const fixedWindowScript = redis.script(lua.scripts.fw)
const slidingWindowScript = redis.script(lua.scripts.sw)

/** The key of one limiter and key (tests read it). */
export const keyOf = lua.keyOf

export const make = (
  client: redis.Client,
  options: ResolvedRateLimiter
): Store => {
  const margin = redis.millisArg(options.marginMillis)
  const fallback = outagePolicy(options, "RateLimiterStore (redis): Redis")

  const fixedOf = lua.fixedCache<redis.Script>(options.prefix)
  const fixed = (algorithm: Algorithm, params: TokenBucketParams | WindowParams): lua.Fixed<redis.Script> => {
    if (algorithm === "token-bucket") {
      const p = params as TokenBucketParams
      return fixedOf(p, tokenBucketScript, "tb", p.capacity, p.refillPerSecond)
    }
    const p = params as WindowParams
    return algorithm === "fixed-window"
      ? fixedOf(p, fixedWindowScript, "fw", p.limit, p.windowMillis)
      : fixedOf(p, slidingWindowScript, "sw", p.limit, p.windowMillis)
  }
  const deadlines = redis.deadlinesFor(options.timeoutMillis)

  /**
   * One decision: every script takes ARGV now, cost, its limit, its rate or window, and the expiry margin. An error
   * answers with the fallback decision in the same step (no catchAll frame per call); with `finish` (the limiter's
   * `Decider` path) the reply is decoded when it arrives and `finish` runs in the caller's fiber.
   */
  class DecisionCall<B> extends redis.KeyScriptCall<B, never> {
    constructor(
      f: lua.Fixed<redis.Script>,
      key: string,
      cost: number,
      private readonly limit: number,
      private readonly nowMillis: number,
      private readonly finish: ((d: StoreDecision) => B) | undefined
    ) {
      super(client, f.script, lua.keyFor(f, key), lua.argsFor(f, cost, nowMillis, margin))
    }

    answer(reply: unknown): Effect.Effect<B> {
      const d = lua.decode(this.limit, reply)
      const finish = this.finish
      return finish === undefined ? Effect.succeed(d as B) : Effect.sync(() => finish(d))
    }

    recover(cause: unknown): Effect.Effect<B> {
      const d = fallback(this.limit, this.nowMillis, cause)
      return this.finish === undefined ? d as Effect.Effect<B> : Effect.map(d, this.finish)
    }
  }

  const decide = <B>(
    algorithm: Algorithm,
    key: string,
    cost: number,
    params: TokenBucketParams | WindowParams,
    nowMillis: number,
    finish: ((d: StoreDecision) => B) | undefined
  ): Effect.Effect<B> => {
    const f = fixed(algorithm, params)
    return Effect.async<B>((resume) =>
      new DecisionCall(f, key, cost, f.limit, nowMillis, finish).start(resume, deadlines)
    )
  }

  return withDecider({
    tokenBucket: (key: string, cost: number, params: TokenBucketParams, nowMillis: number) =>
      decide("token-bucket", key, cost, params, nowMillis, undefined),
    fixedWindow: (key: string, cost: number, params: WindowParams, nowMillis: number) =>
      decide("fixed-window", key, cost, params, nowMillis, undefined),
    slidingWindow: (key: string, cost: number, params: WindowParams, nowMillis: number) =>
      decide("sliding-window", key, cost, params, nowMillis, undefined)
  }, { decide })
}

export const layer = (options: Options): Layer.Layer<RateLimiterStore> => {
  checkConnection("RateLimiterStore/Redis", options)
  const resolved = resolveRateLimiter(options)
  return Layer.scoped(
    RateLimiterStore,
    Effect.map(redis.acquire(options), (client) => make(client, resolved))
  )
}
