/**
 * Typed errors of the resilient HTTP client, named after what happened to the request rather than the
 * socket error behind them. Each matches one outcome of `HttpClassify`:
 *
 * | error | `HttpClassify` outcome | meaning |
 * |---|---|---|
 * | {@link ConnectFailed} | `notSent` | never left (refused, connect timeout, DNS, unreachable): always safe to retry |
 * | {@link NoResponse} | `unknownOutcome` | sent (or maybe sent), no answer (read timeout, reset): the server may have run it |
 * | {@link StatusError} | `status(code)` | a status worth retrying (408, 429, 5xx) that the client gave up on |
 *
 * `NoResponse` was called `UnknownOutcome` before, which was also the name and `_tag` of the
 * `HttpClassify.UnknownOutcome` data type; `Effect.catchTag("NoResponse", …)` catches it now.
 *
 * @since 0.1.0
 */
import type { ConnectFailureReason } from "../core/httpClassify.js"
import * as core from "../core/httpClassify.js"
import * as internal from "../internal/http/httpErrors.js"

/**
 * The connection was never made: the request did not leave the client, so repeating it is always safe.
 * `reason` says why: `"refused"`, `"timeout"` (the connect timeout), `"dns"` or `"unreachable"`.
 *
 * @since 0.1.0
 * @category errors
 */
export const ConnectFailed: typeof internal.ConnectFailed = internal.ConnectFailed

/**
 * @since 0.1.0
 * @category errors
 */
export type ConnectFailed = internal.ConnectFailed

/**
 * The request was sent (or may have been) and no response arrived: the attempt timed out while waiting
 * (`reason: "read-timeout"`) or the connection was reset (`"reset"`). The server may have run it, so the client
 * repeats it only when that is safe (an idempotent method or an Idempotency-Key).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import type { HttpErrors } from "effect-resilience"
 *
 * declare const call: Effect.Effect<string, HttpErrors.NoResponse>
 *
 * const explained = Effect.catchTag(call, "NoResponse", (e) => Effect.succeed(`no answer (${e.reason})`))
 * ```
 *
 * @since 0.1.0
 * @category errors
 */
export const NoResponse: typeof internal.NoResponse = internal.NoResponse

/**
 * @since 0.1.0
 * @category errors
 */
export type NoResponse = internal.NoResponse

/**
 * A response arrived with a status the client retries (408, 429, 500, 502, 503, 504, for a request that is
 * safe to repeat), and it gave up: it is the `last` of `RetriesExhausted`, or the failure itself with
 * `retry: false`. Other statuses are returned as responses.
 *
 * It is not `@effect/platform`'s `HttpClientError.ResponseError`, on purpose: a `ResponseError` with reason
 * `"StatusCode"` is what the caller's own `HttpClient.filterStatusOk` raises, around the live response; a
 * `StatusError` is a status the client chose to retry, and its `response` is a detached copy (at most 64 KiB of
 * the body, its connection already released). With one tag for both, `Effect.catchTag("ResponseError", …)`
 * could not tell "the server stayed unavailable" from "my code refused this status".
 *
 * @since 0.1.0
 * @category errors
 */
export const StatusError: typeof internal.StatusError = internal.StatusError

/**
 * @since 0.1.0
 * @category errors
 */
export type StatusError = internal.StatusError

/**
 * Where in the cause chain of a transport error an error code says the connection was never made (eight
 * levels at most); `undefined` when none does, and the request may have been sent.
 *
 * @since 0.1.0
 * @category classification
 */
export const connectFailureReason: (cause: unknown) => ConnectFailureReason | undefined = core.connectFailureReason
