/**
 * Retries that only retry what may be retried, honour the server's `Retry-After`, stop before the
 * deadline, and respect a client-wide {@link RetryBudget}.
 *
 * @since 0.1.0
 */
import type { Cause, Duration, Effect, Metric, Schedule } from "effect"
import type { Retryable } from "./Failure.js"
import type { Fields } from "./internal/errorFields.js"
import * as internal from "./internal/retry.js"
import type { Budget } from "./RetryBudget.js"

/**
 * Why `Retry.retry` gave up:
 * - `"attempts"`: `maxAttempts` calls were made (or the schedule ended);
 * - `"deadline"`: the next retry would start at or after the deadline;
 * - `"budget"`: the {@link RetryBudget} refused;
 * - `"retry-after"`: the server asked to wait longer than `maxRetryAfter`.
 *
 * @since 0.1.0
 * @category models
 */
export type StopReason = "attempts" | "deadline" | "budget" | "retry-after"

/**
 * Retrying stopped. `last` is the cause inside the last {@link Retryable}.
 *
 * `new RetriesExhausted({ … })` takes `Fields<RetriesExhausted>`: the fields that the interface
 * {@link RetriesExhausted} declares, without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const RetriesExhausted: new<E = unknown>(args: Fields<RetriesExhausted<E>>) => RetriesExhausted<E> =
  internal.RetriesExhausted

/**
 * Retrying stopped. `last` is the cause inside the last {@link Retryable}.
 *
 * @since 0.1.0
 * @category errors
 */
export interface RetriesExhausted<E = unknown> extends Cause.YieldableError {
  readonly _tag: "RetriesExhausted"
  /** How many times the effect ran, the first call included. */
  readonly attempts: number
  /** Why retrying stopped. */
  readonly reason: StopReason
  /** The cause inside the last {@link Retryable} failure. */
  readonly last: E
}

/**
 * What `onRetry` sees before each retry's sleep.
 *
 * @since 0.1.0
 * @category models
 */
export interface RetryEvent {
  /** The attempt that just failed, counting the first call as 1. */
  readonly attempt: number
  /** How long the retry waits: `max(schedule delay, retryAfter)`. */
  readonly delay: Duration.Duration
  readonly failure: Retryable<unknown>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** The delays between attempts, e.g. `Backoff.fullJitter(...)`. The retry stops when it ends. */
  readonly schedule: Schedule.Schedule<Duration.Duration, unknown, R>
  /** Attempts in all, counting the first call: `4` means at most 3 retries. An integer >= 1 (or `Infinity`). */
  readonly maxAttempts: number
  /** A `retryAfter` longer than this stops the retries with reason `"retry-after"`. Default: 60 seconds. */
  readonly maxRetryAfter?: Duration.DurationInput
  /** Called before each retry's sleep, e.g. to log it. */
  readonly onRetry?: (event: RetryEvent) => Effect.Effect<void>
  /**
   * The {@link RetryBudget} these retries draw from, built once with `RetryBudget.unsafeMake` and shared by
   * every call of the policy. Without it, a `RetryBudget` in the context is used, if any.
   */
  readonly budget?: Budget
}

/**
 * The cause type inside the `Retryable` members of `E`.
 *
 * @since 0.1.0
 * @category models
 */
export type RetryableCause<E> = E extends Retryable<infer C> ? C : never

/**
 * The error type after `Retry.retry`: `Retryable` is gone, `RetriesExhausted` appears when there was one.
 *
 * @since 0.1.0
 * @category models
 */
export type RetriedError<E> =
  | Exclude<E, Retryable<any>>
  | ([Extract<E, Retryable<any>>] extends [never] ? never : RetriesExhausted<RetryableCause<E>>)

/**
 * What `Retry.retry` asks of the error type: at least one {@link Retryable} member. An error channel without
 * one would never be retried, so applying `Retry.retry` to it is a compile error whose message says what to do.
 * `unknown` and `any` are refused too: an error typed so (`Effect.tryPromise({ try, catch: (e) => e })`) is
 * almost never a `Retryable`, and nothing in the type says which failures may be retried.
 *
 * @since 0.1.0
 * @category models
 */
export type RequireRetryable<E> = unknown extends E ? NothingToRetry
  : [Extract<E, Retryable<any>>] extends [never] ? NothingToRetry
  : unknown

/**
 * The type a `Retry.retry` argument is missing when its error channel has no `Retryable` member.
 *
 * @since 0.1.0
 * @category models
 */
export interface NothingToRetry {
  readonly "Retry.retry: nothing in this error type is Retryable, so it would never retry. Classify the errors first with Failure.retryWhen or Failure.classify, or fail with Failure.retryable":
    never
}

/**
 * Counts retries scheduled by `Retry.retry` (`effect_resilience_retries_total`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const retriesTotal: Metric.Metric.Counter<number> = internal.retries

/**
 * Counts `Retry.retry` calls that gave up (`effect_resilience_retries_exhausted_total`), tagged `reason`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const exhaustedTotal: Metric.Metric.Counter<number> = internal.exhausted

/**
 * Retries `self` while it fails with a {@link Retryable}.
 *
 * - `Fatal`, any other typed error, defects and interruption pass through at once, unchanged.
 * - The delay before a retry is `max(schedule delay, failure.retryAfter)`.
 * - With a deadline (`Deadline.within`), a retry that would start at or after it is not attempted.
 * - With a `budget` option, or else a {@link RetryBudget} in the context, every failed attempt and success is
 *   recorded in it, and a retry it refuses is not attempted.
 * - An error type with no `Retryable` member — `unknown` and `any` included — does not compile (see
 *   {@link RequireRetryable}): classify first.
 * - The success path costs one catch frame: no schedule work happens until a failure.
 *
 * Each retry increments the `effect_resilience_retries_total` counter and annotates the current span
 * with `retry.attempt` and `retry.delay_ms`; giving up increments `effect_resilience_retries_exhausted_total`
 * tagged with the reason.
 *
 * Throws `IllegalArgumentException` when `maxAttempts` is not an integer >= 1 or `maxRetryAfter` is not a
 * non-negative duration.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Backoff, Deadline, Failure, Retry } from "effect-resilience"
 *
 * declare const charge: Effect.Effect<string, { readonly status: number }>
 *
 * const program = charge.pipe(
 *   Failure.retryWhen((e) => e.status === 503),
 *   Retry.retry({ schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }), maxAttempts: 4 }),
 *   Deadline.within("5 seconds")
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const retry: {
  <R2 = never>(
    options: Options<R2>
  ): <A, E, R>(self: Effect.Effect<A, E, R> & RequireRetryable<E>) => Effect.Effect<A, RetriedError<E>, R | R2>
  <A, E, R, R2 = never>(
    self: Effect.Effect<A, E, R> & RequireRetryable<E>,
    options: Options<R2>
  ): Effect.Effect<A, RetriedError<E>, R | R2>
} = internal.retry
