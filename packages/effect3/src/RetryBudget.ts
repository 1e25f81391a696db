/**
 * Client-wide retry throttling, as gRPC does it (gRFC A6 "retry throttling").
 *
 * A budget holds `tokens`, starting at `maxTokens`. Every failed attempt takes one token (never below
 * zero), every success gives back `tokenRatio` (never above `maxTokens`), and a retry is allowed only
 * while more than half the tokens are left. When a dependency is down the tokens drain and retries stop
 * for everyone using the budget, so retries cannot multiply an outage; when it recovers, successes
 * refill the budget.
 *
 * A budget only works when it is **shared**: build it once (`unsafeMake`, or `layer` provided once at the
 * top of the program) and let every call use it. `Retry.retry` takes it as its `budget` option, or else
 * consults a `RetryBudget` in the context. A budget built per call starts full every time and limits nothing.
 *
 * @since 0.1.0
 */
import type { Effect, Layer } from "effect"
import * as internal from "./internal/retryBudget.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The bucket size; must be > 0. A retry needs more than `maxTokens / 2` tokens. */
  readonly maxTokens: number
  /** Tokens given back per success; must be > 0. */
  readonly tokenRatio: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Budget {
  readonly maxTokens: number
  readonly tokenRatio: number
  /** The tokens left now. */
  readonly tokens: Effect.Effect<number>
  /** Records a success: `tokens = min(maxTokens, tokens + tokenRatio)`. */
  readonly recordSuccess: Effect.Effect<void>
  /** Records a failed attempt (`tokens = max(0, tokens - 1)`) and says whether a retry may follow. */
  readonly recordFailure: Effect.Effect<boolean>
  /** The same, for code that is already inside a synchronous step. */
  unsafeRecordSuccess(): void
  unsafeRecordFailure(): boolean
}

/**
 * The service tag.
 *
 * @since 0.1.0
 * @category tags
 */
export const RetryBudget: typeof internal.RetryBudget = internal.RetryBudget

/**
 * The service tag's type.
 *
 * @since 0.1.0
 * @category tags
 */
export type RetryBudget = internal.RetryBudget

/**
 * Builds a budget. Both options are kept to three decimal places and the rest is ignored, as gRPC does
 * (`tokenRatio: 0.5466` gives back 0.546 per success). Throws `IllegalArgumentException` for `maxTokens <= 0`,
 * a value below 0.001 (nothing would be left of it) or a value that is not a finite number.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Backoff, Failure, Retry, RetryBudget } from "effect-resilience"
 *
 * declare const call: Effect.Effect<string, { readonly status: number }>
 *
 * // one budget, built once, shared by every call of the policy: retries stay under ~10% of successes
 * const retry = Retry.retry({
 *   schedule: Backoff.fullJitter({ base: "50 millis", cap: "2 seconds" }),
 *   maxAttempts: 3,
 *   budget: RetryBudget.unsafeMake({ maxTokens: 10, tokenRatio: 0.1 })
 * })
 *
 * const program = call.pipe(Failure.retryWhen((e) => e.status === 503), retry)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const unsafeMake: (options: Options) => Budget = internal.unsafeMake

/**
 * `unsafeMake` as an effect. Bad options throw `IllegalArgumentException` when `make` is called, as
 * `unsafeMake` does.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options: Options) => Effect.Effect<Budget> = internal.make

/**
 * A budget shared by everything the layer is provided to. Provide it **once**, where the program (or the
 * server) is built: provided around each call, every call would get a fresh, full budget.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Backoff, type Failure, Retry, RetryBudget } from "effect-resilience"
 *
 * declare const call: Effect.Effect<string, Failure.Retryable<number>>
 *
 * const retry = Retry.retry({ schedule: Backoff.fullJitter({ base: "50 millis", cap: "2 seconds" }), maxAttempts: 3 })
 *
 * // every call in `main` draws from one budget: retries stay under ~10% of successful calls (plus a burst of 5)
 * const main = Effect.forEach(Array.from({ length: 100 }), () => retry(call)).pipe(
 *   Effect.provide(RetryBudget.layer({ maxTokens: 10, tokenRatio: 0.1 }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options: Options) => Layer.Layer<RetryBudget> = internal.layer
