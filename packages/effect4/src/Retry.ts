/**
 * Retries that only retry what may be retried, honour the server's `Retry-After`, stop before the
 * deadline, and respect a client-wide {@link RetryBudget}.
 *
 * @since 1.0.0
 */
import type { Cause, Duration, Effect, Metric, Schedule } from "effect"
import type { DeadlineExceeded } from "./Deadline.js"
import type { Fatal, Retryable } from "./Failure.js"
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
 * @since 1.0.0
 * @category models
 */
export type StopReason = "attempts" | "deadline" | "budget" | "retry-after"

/**
 * Retrying stopped. `last` is the cause inside the last {@link Retryable}.
 *
 * `new RetriesExhausted({ … })` takes `Fields<RetriesExhausted>`: the fields that the interface
 * {@link RetriesExhausted} declares, without `_tag`.
 *
 * @since 1.0.0
 * @category errors
 */
export const RetriesExhausted: new<E = unknown>(args: Fields<RetriesExhausted<E>>) => RetriesExhausted<E> =
  internal.RetriesExhausted

/**
 * Retrying stopped. `last` is the cause inside the last {@link Retryable}.
 *
 * @since 1.0.0
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
 * @since 1.0.0
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
 * @since 1.0.0
 * @category models
 */
export interface Options<R = never> {
  /**
   * The delays between attempts: any `Schedule`, e.g. `Backoff.fullJitter(...)`, `Schedule.spaced("1 second")`,
   * `Schedule.exponential("100 millis")`; `Schedule.recurs(n)` retries at once. Only its delays count: its output
   * (a `Duration` or a count) is not used. The retry stops when it ends.
   */
  readonly schedule: Schedule.Schedule<unknown, unknown, never, R>
  /** Attempts in all, counting the first call: `4` means at most 3 retries. An integer >= 1 (or `Infinity`). */
  readonly maxAttempts: number
  /** A `retryAfter` longer than this stops the retries with reason `"retry-after"`. Default: 60 seconds. */
  readonly maxRetryAfter?: Duration.Input
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
 * @since 1.0.0
 * @category models
 */
export type RetryableCause<E> = E extends Retryable<infer C> ? C : never

/**
 * The error type after `Retry.retry`: `Retryable` is gone, `RetriesExhausted` appears when there was one.
 *
 * @since 1.0.0
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
 * @since 1.0.0
 * @category models
 */
export type RequireRetryable<E> = unknown extends E ? NothingToRetry
  : [Extract<E, Retryable<any>>] extends [never] ? NothingToRetry
  : unknown

/**
 * The type a `Retry.retry` argument is missing when its error channel has no `Retryable` member.
 *
 * @since 1.0.0
 * @category models
 */
export interface NothingToRetry {
  readonly "Retry.retry: nothing in this error type is Retryable, so it would never retry. Classify the errors first with Failure.retryWhen or Failure.classify, or fail with Failure.retryable":
    never
}

/**
 * Counts retries scheduled by `Retry.retry` (`effect_resilience_retries_total`), with no attributes; the retries
 * of a `ResilientHttpClient` are counted in series of their own, labelled `client` and `origin`. `Metric.value`
 * reads one series, the one its attributes name: `Metric.value(Retry.retriesTotal)` counts `Retry.retry`'s
 * own retries only (and reads 0 for a client's), `Metric.value(Metric.withAttributes(Retry.retriesTotal,
 * { client, origin }))` one client's retries to one origin; `Metric.snapshot` lists every series.
 *
 * @since 1.0.0
 * @category metrics
 */
export const retriesTotal: Metric.Counter<number> = internal.retries

/**
 * Counts `Retry.retry` calls that gave up (`effect_resilience_retries_exhausted_total`), labelled `reason`, and
 * `client` and `origin` for a `ResilientHttpClient`'s (see {@link retriesTotal} on reading a series).
 *
 * @since 1.0.0
 * @category metrics
 */
export const exhaustedTotal: Metric.Counter<number> = internal.exhausted

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
 * tagged with the reason, and annotates the span with `retry.stop_reason`. Each decision is also an event of the
 * current span: `Retry.backoff` (the delay and its source) and `Retry.exhausted` (docs/observability.md, Traces).
 *
 * The error type keeps the classification: `Fatal<E>`, and `RetriesExhausted<E>` with the reason. To handle
 * your own error type instead (`Effect.catchTag("HttpError", …)`), add {@link unwrap} after it.
 *
 * Throws `IllegalArgumentError` when `maxAttempts` is not an integer >= 1 or `maxRetryAfter` is not a
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
 * @since 1.0.0
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

/**
 * The error type after {@link unwrap}: `Fatal<E>` and `Retryable<E>` become `E`, `RetriesExhausted<E>` becomes
 * `E | DeadlineExceeded`, any other member stays.
 *
 * @since 1.0.0
 * @category models
 */
export type Unwrapped<E> = E extends Fatal<infer C> ? C
  : E extends Retryable<infer C> ? C
  : E extends RetriesExhausted<infer C> ? C | DeadlineExceeded
  : E

/**
 * Fails with your own errors again, after {@link retry}: the one step between `Retry.retry` and
 * `Effect.catchTag` on your own tag. What each failure becomes:
 *
 * - `Fatal<E>` (never retried): its `cause`, the `E` itself;
 * - `RetriesExhausted<E>` with reason `"attempts"` (attempts or schedule used up), `"budget"` (the `RetryBudget`
 *   refused the next retry) or `"retry-after"` (the server asked to wait longer than `maxRetryAfter`): `last`,
 *   the `E` of the last attempt;
 * - `RetriesExhausted<E>` with reason `"deadline"` (the next retry would have started after the deadline):
 *   `DeadlineExceeded` — the caller's time is up, as `Deadline.within` would have said a moment later, and
 *   `Deadline.isTimeUp` still matches it;
 * - a `Retryable<E>` (`unwrap` without `retry`): its `cause`;
 * - anything else, defects and interruption: unchanged.
 *
 * The reason is not lost: giving up is counted in {@link exhaustedTotal} by `reason`, and the span carries
 * `retry.stop_reason`. Where the reason decides what to do, handle `RetriesExhausted` before `unwrap`.
 *
 * @example
 * ```ts
 * import { Data, Effect } from "effect"
 * import { Backoff, Failure, Retry } from "effect-resilience"
 *
 * class HttpError extends Data.TaggedError("HttpError")<{ readonly status: number }> {}
 *
 * declare const fetchUser: Effect.Effect<string, HttpError>
 *
 * const user = fetchUser.pipe(
 *   Failure.retryWhen((e) => e.status >= 500),
 *   Retry.retry({ schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }), maxAttempts: 4 }),
 *   Retry.unwrap, // Effect<string, HttpError | DeadlineExceeded>
 *   Effect.catchTag("HttpError", (e) => Effect.succeed(`unavailable (${e.status})`))
 * )
 * ```
 *
 * @since 1.0.0
 * @category combinators
 */
export const unwrap: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, Unwrapped<E>, R> = internal
  .unwrap as any
