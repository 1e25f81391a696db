/**
 * The error channel says whether a failure may be retried.
 *
 * Wrap a failure in {@link Retryable} when doing the same thing again may work (a 503, a connect timeout),
 * in {@link Fatal} when it cannot (a 400, a validation error). `Retry.retry` retries only `Retryable`
 * failures and removes them from the error type.
 *
 * @since 0.1.0
 */
import type { Cause, Duration, Effect } from "effect"
import type { Fields } from "./internal/errorFields.js"
import * as internal from "./internal/failure.js"

/**
 * A failure that may succeed if tried again. `retryAfter` is the server's hint (e.g. `Retry-After`);
 * `Retry.retry` never waits less than it.
 *
 * `new Retryable({ … })` takes `Fields<Retryable>`: the fields that the interface {@link Retryable} declares,
 * without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const Retryable: new<E = unknown>(args: Fields<Retryable<E>>) => Retryable<E> = internal.Retryable

/**
 * A failure that may succeed if tried again.
 *
 * @since 0.1.0
 * @category errors
 */
export interface Retryable<E = unknown> extends Cause.YieldableError {
  readonly _tag: "Retryable"
  /** The failure itself. */
  readonly cause: E
  /** The server's hint (e.g. `Retry-After`): `Retry.retry` never waits less than it. */
  readonly retryAfter?: Duration.Duration
}

/**
 * A failure that will not go away by trying again.
 *
 * `new Fatal({ … })` takes `Fields<Fatal>`: the fields that the interface {@link Fatal} declares, without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const Fatal: new<E = unknown>(args: Fields<Fatal<E>>) => Fatal<E> = internal.Fatal

/**
 * A failure that will not go away by trying again.
 *
 * @since 0.1.0
 * @category errors
 */
export interface Fatal<E = unknown> extends Cause.YieldableError {
  readonly _tag: "Fatal"
  /** The failure itself. */
  readonly cause: E
}

/**
 * Either classification.
 *
 * @since 0.1.0
 * @category models
 */
export type Classified<E> = Retryable<E> | Fatal<E>

/**
 * Builds a {@link Retryable}.
 *
 * @example
 * ```ts
 * import { Failure } from "effect-resilience"
 *
 * const busy = Failure.retryable("503", "2 seconds")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const retryable: <E>(cause: E, retryAfter?: Duration.DurationInput) => Retryable<E> = internal.retryable

/**
 * Builds a {@link Fatal}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fatal: <E>(cause: E) => Fatal<E> = internal.fatal

/**
 * @since 0.1.0
 * @category guards
 */
export const isRetryable: (u: unknown) => u is Retryable<unknown> = internal.isRetryable

/**
 * @since 0.1.0
 * @category guards
 */
export const isFatal: (u: unknown) => u is Fatal<unknown> = internal.isFatal

/**
 * Classifies every typed failure of an effect with a function of yours, so the error channel says
 * what may be retried. Defects and interruption are untouched.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Failure } from "effect-resilience"
 *
 * class HttpError {
 *   readonly _tag = "HttpError"
 *   constructor(readonly status: number) {}
 * }
 *
 * declare const call: Effect.Effect<string, HttpError>
 *
 * // Effect<string, Retryable<HttpError> | Fatal<HttpError>>
 * const classified = call.pipe(
 *   Failure.classify((e) => e.status >= 500 ? Failure.retryable(e) : Failure.fatal(e))
 * )
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const classify: {
  <E, E2 extends Retryable<any> | Fatal<any>>(
    f: (error: E) => E2
  ): <A, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E2, R>
  <A, E, R, E2 extends Retryable<any> | Fatal<any>>(
    self: Effect.Effect<A, E, R>,
    f: (error: E) => E2
  ): Effect.Effect<A, E2, R>
} = internal.classify

/**
 * Marks failures matching `predicate` as {@link Retryable} and every other failure as {@link Fatal}.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Failure } from "effect-resilience"
 *
 * declare const call: Effect.Effect<string, { readonly status: number }>
 *
 * const classified = call.pipe(Failure.retryWhen((e) => e.status === 503))
 * ```
 *
 * @since 0.1.0
 * @category combinators
 */
export const retryWhen: {
  <E>(predicate: (error: E) => boolean): <A, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, Classified<E>, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, predicate: (error: E) => boolean): Effect.Effect<A, Classified<E>, R>
} = internal.retryWhen
