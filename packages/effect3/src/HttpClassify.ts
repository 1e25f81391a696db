/**
 * Decides whether a failed HTTP request may be sent again, from what is known about it (RFC 9110 §9.2.2
 * and §15). The answer depends on whether the request could have run and whether running it twice is harmless:
 *
 * | outcome                                                      | safe to repeat¹ | otherwise |
 * | ------------------------------------------------------------ | --------------- | --------- |
 * | {@link notSent}: connect refused / timeout, DNS, pool timeout | retry           | retry     |
 * | {@link unknownOutcome}: read timeout, reset after sending     | retry           | fatal     |
 * | `status(c)`, c in 408, 429, 500, 502, 503, 504                | retry           | fatal     |
 * | `status(c)`, any other c in 100–599 (2xx, 3xx, 400, 401, 403, 404, 409, 422, 501, 505, …) | fatal | fatal |
 * | `status(c)`, c not an integer in 100–599                      | fatal           | fatal     |
 *
 * ¹ Safe to repeat: the method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE — compared
 * case-insensitively; POST, PATCH and unknown methods are not) **or** the request carries an `Idempotency-Key`.
 *
 * "fatal" means "do not retry automatically". RFC 9110 says a client SHOULD NOT retry a non-idempotent
 * request unless it knows the request is idempotent (the key) or was never received (`notSent`).
 * A 500 is retried (idempotent requests only) because it is often transient; the retry budget bounds the
 * cost when it is not. How long to wait is another question: see `RetryAfter` for 429 and 503.
 *
 * @since 0.1.0
 */
import * as core from "@effect-resilience/core/httpClassify"

/**
 * The request never left the client (connection refused, connect timeout, DNS failure, pool timeout).
 * The resilient client reports it as `HttpErrors.ConnectFailed`.
 *
 * @since 0.1.0
 * @category models
 */
export interface NotSent extends core.NotSent {}

/**
 * The request was (maybe partly) sent but no response came back (read timeout, connection reset):
 * the server may have run it. The resilient client reports it as `HttpErrors.NoResponse`.
 *
 * @since 0.1.0
 * @category models
 */
export interface UnknownOutcome extends core.UnknownOutcome {}

/**
 * A response arrived with this status code.
 *
 * @since 0.1.0
 * @category models
 */
export interface Status extends core.Status {}

/**
 * What is known about a request that did not succeed.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = NotSent | UnknownOutcome | Status

/**
 * The decision: `"retry"` or `"fatal"` (do not retry).
 *
 * @since 0.1.0
 * @category models
 */
export type Decision = core.Decision

/**
 * The request never left the client.
 *
 * @since 0.1.0
 * @category constructors
 */
export const notSent: NotSent = core.notSent

/**
 * The request may have run; no response arrived.
 *
 * @since 0.1.0
 * @category constructors
 */
export const unknownOutcome: UnknownOutcome = core.unknownOutcome

/**
 * A response arrived with status `code`. Any number is accepted; codes outside 100–599 classify as fatal.
 *
 * @since 0.1.0
 * @category constructors
 */
export const status: (code: number) => Status = core.status

/**
 * The idempotent methods of RFC 9110 §9.2.2, upper case. A copy: changing it changes no decision.
 *
 * @since 0.1.0
 * @category constants
 */
export const idempotentMethods: ReadonlySet<string> = core.idempotentMethods

/**
 * Statuses worth retrying when the request is safe to repeat: 408 Request Timeout, 429 Too Many Requests,
 * 500 Internal Server Error, 502 Bad Gateway, 503 Service Unavailable, 504 Gateway Timeout. A copy:
 * changing it changes no decision.
 *
 * @since 0.1.0
 * @category constants
 */
export const retryableStatuses: ReadonlySet<number> = core.retryableStatuses

/**
 * Whether running the method twice has the same intended effect as once. Case-insensitive (ASCII only, so
 * `"get"` is idempotent but a look-alike with non-ASCII letters is not); unknown methods are not idempotent.
 *
 * @example
 * ```ts
 * import { HttpClassify } from "effect-resilience"
 *
 * HttpClassify.isIdempotentMethod("put") // true
 * HttpClassify.isIdempotentMethod("POST") // false
 * ```
 *
 * @since 0.1.0
 * @category predicates
 */
export const isIdempotentMethod: (method: string) => boolean = core.isIdempotentMethod

/**
 * Whether `code` is a valid status (an integer in 100–599) that is worth retrying when the request is safe
 * to repeat. See {@link retryableStatuses}.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isRetryableStatus: (code: number) => boolean = core.isRetryableStatus

/**
 * Input of {@link classify}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Request {
  /** The HTTP method, any case. */
  readonly method: string
  readonly outcome: Outcome
  /** Whether the request carried an `Idempotency-Key` header (makes any method safe to repeat). Default false. */
  readonly hasIdempotencyKey?: boolean | undefined
}

/**
 * Classifies a failed request as `"retry"` or `"fatal"` using the table in the module documentation.
 * Pure and total: it never throws, and anything unrecognised is `"fatal"`.
 *
 * @example
 * ```ts
 * import { HttpClassify } from "effect-resilience"
 *
 * HttpClassify.classify({ method: "POST", outcome: HttpClassify.notSent }) // "retry"
 * HttpClassify.classify({ method: "POST", outcome: HttpClassify.unknownOutcome }) // "fatal"
 * HttpClassify.classify({ method: "POST", outcome: HttpClassify.unknownOutcome, hasIdempotencyKey: true }) // "retry"
 * HttpClassify.classify({ method: "GET", outcome: HttpClassify.status(503) }) // "retry"
 * HttpClassify.classify({ method: "GET", outcome: HttpClassify.status(404) }) // "fatal"
 * ```
 *
 * @since 0.1.0
 * @category classification
 */
export const classify: (request: Request) => Decision = core.classify
