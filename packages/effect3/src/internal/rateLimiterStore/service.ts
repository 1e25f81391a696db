/**
 * The rate limiter store's tag, defined here and re-exported by `RateLimiterStore.ts`: the stores
 * (`rateLimiterStore/{memory,redis}.ts`) and the limiter reach it without importing a public module; and the
 * limiter's private path to the Redis store.
 */
import type { Effect } from "effect"
import { Context } from "effect"
import type { Algorithm } from "../../RateLimiter.js"
import type { Store, StoreDecision, TokenBucketParams, WindowParams } from "../../RateLimiterStore.js"

export class RateLimiterStore extends Context.Tag("effect-resilience/RateLimiterStore")<RateLimiterStore, Store>() {}

/**
 * The private path from the limiter to a store of this library that answers over the network (Redis): the
 * decision for `algorithm`, handed to `finish` in the same step that resumes the caller's fiber, so a decision
 * costs no step of its own to map the store's answer to the limiter's. `finish` runs in the caller's fiber, as
 * a map of the store's effect would; errors end as the store's outage policy says, then go through `finish` too.
 */
export interface Decider {
  decide<B>(
    algorithm: Algorithm,
    key: string,
    cost: number,
    params: TokenBucketParams | WindowParams,
    nowMillis: number,
    finish: (d: StoreDecision) => B
  ): Effect.Effect<B>
}

const deciders = new WeakMap<Store, Decider>()

/** The decider of `store`, when it is a network store of this library. */
export const deciderOf = (store: Store): Decider | undefined => deciders.get(store)

/** Gives `store` its decider (the stores that have one call this once, when made). */
export const withDecider = <S extends Store>(store: S, decider: Decider): S => {
  deciders.set(store, decider)
  return store
}
