/**
 * The error channel says whether a failure may be retried.
 *
 * Wrap a failure in {@link Retryable} when doing the same thing again may work (a 503, a connect timeout),
 * in {@link Fatal} when it cannot (a 400, a validation error). `Retry.retry` retries only `Retryable`
 * failures and removes them from the error type.
 *
 * @since 0.1.0
 */
import { Data, Duration, Effect } from "effect"
import { dual } from "effect/Function"

/**
 * A failure that may succeed if tried again. `retryAfter` is the server's hint (e.g. `Retry-After`);
 * `Retry.retry` never waits less than it.
 *
 * @since 0.1.0
 * @category errors
 */
export class Retryable<E = unknown> extends Data.TaggedError("Retryable")<{
  readonly cause: E
  readonly retryAfter?: Duration.Duration
}> {
  override get message(): string {
    return `retryable failure: ${describe(this.cause)}`
  }
}

/**
 * A failure that will not go away by trying again.
 *
 * @since 0.1.0
 * @category errors
 */
export class Fatal<E = unknown> extends Data.TaggedError("Fatal")<{ readonly cause: E }> {
  override get message(): string {
    return `fatal failure: ${describe(this.cause)}`
  }
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
export const retryable = <E>(cause: E, retryAfter?: Duration.DurationInput): Retryable<E> =>
  retryAfter === undefined
    ? new Retryable({ cause })
    : new Retryable({ cause, retryAfter: Duration.decode(retryAfter) })

/**
 * Builds a {@link Fatal}.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fatal = <E>(cause: E): Fatal<E> => new Fatal({ cause })

/**
 * @since 0.1.0
 * @category guards
 */
export const isRetryable = (u: unknown): u is Retryable<unknown> =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "Retryable"

/**
 * @since 0.1.0
 * @category guards
 */
export const isFatal = (u: unknown): u is Fatal<unknown> =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "Fatal"

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
} = dual(
  2,
  <A, E, R, E2 extends Retryable<any> | Fatal<any>>(
    self: Effect.Effect<A, E, R>,
    f: (error: E) => E2
  ): Effect.Effect<A, E2, R> => Effect.mapError(self, f)
)

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
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, predicate: (error: E) => boolean): Effect.Effect<A, Classified<E>, R> =>
    Effect.mapError(self, (e): Classified<E> => predicate(e) ? new Retryable({ cause: e }) : new Fatal({ cause: e }))
)

const describe = (cause: unknown): string => {
  if (cause instanceof Error) return cause.message
  if (typeof cause === "object" && cause !== null && "_tag" in cause) return String((cause as { _tag: unknown })._tag)
  return String(cause)
}
