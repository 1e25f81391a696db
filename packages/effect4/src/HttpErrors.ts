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
 * @since 1.0.0
 */
import type { ConnectFailureReason } from "@effect-resilience/core/httpClassify"
import * as core from "@effect-resilience/core/httpClassify"
import type { Cause } from "effect"
import type { HttpClientRequest, HttpClientResponse } from "effect/http"
import type { Fields } from "./internal/errorFields.js"
import * as internal from "./internal/http/httpErrors.js"

/**
 * The connection was never made: the request did not leave the client, so repeating it is always safe.
 * `reason` says why: `"refused"`, `"timeout"` (the connect timeout), `"dns"` or `"unreachable"`.
 *
 * `new ConnectFailed({ … })` takes `Fields<ConnectFailed>`: the fields that the interface {@link ConnectFailed}
 * declares, without `_tag`.
 *
 * @since 1.0.0
 * @category errors
 */
export const ConnectFailed: new(args: Fields<ConnectFailed>) => ConnectFailed = internal.ConnectFailed

/**
 * @since 1.0.0
 * @category errors
 */
export interface ConnectFailed extends Cause.YieldableError {
  readonly _tag: "ConnectFailed"
  /** Why the connection failed: `"refused"`, `"timeout"` (the connect timeout), `"dns"` or `"unreachable"`. */
  readonly reason: ConnectFailureReason
  /** The request that was not sent. */
  readonly request: HttpClientRequest.HttpClientRequest
  /** The transport's error behind it. */
  readonly cause: unknown
}

/**
 * The request was sent (or may have been) and no response arrived: the attempt timed out while waiting
 * (`reason: "read-timeout"`) or the connection was reset (`"reset"`). The server may have run it, so the client
 * repeats it only when that is safe (an idempotent method or an Idempotency-Key).
 *
 * `new NoResponse({ … })` takes `Fields<NoResponse>`: the fields that the interface {@link NoResponse} declares,
 * without `_tag`.
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
 * @since 1.0.0
 * @category errors
 */
export const NoResponse: new(args: Fields<NoResponse>) => NoResponse = internal.NoResponse

/**
 * @since 1.0.0
 * @category errors
 */
export interface NoResponse extends Cause.YieldableError {
  readonly _tag: "NoResponse"
  /** `"read-timeout"`: the attempt timed out waiting for the response; `"reset"`: the connection was reset. */
  readonly reason: "read-timeout" | "reset"
  /** The request that got no response (the server may have run it). */
  readonly request: HttpClientRequest.HttpClientRequest
  /** The transport's error behind it. */
  readonly cause: unknown
}

/**
 * A response arrived with a status the client retries (408, 429, 500, 502, 503, 504, for a request that is
 * safe to repeat; a keyed request's 409 that says it is still in progress), and it gave up: it is the `last` of
 * `RetriesExhausted`. Other statuses, and every status with `retry: false`, are returned as responses.
 *
 * It is not `effect/http`'s `HttpClientError` with a `StatusCodeError` reason, on purpose: that is what the
 * caller's own `HttpClient.filterStatusOk` raises, around the live response; a `StatusError` is a status the client
 * chose to retry, and its `response` is a detached copy (at most 64 KiB of the body, its connection already
 * released). With one tag for both, `Effect.catchTag("HttpClientError", …)` could not tell "the server stayed
 * unavailable" from "my code refused this status".
 *
 * `new StatusError({ … })` takes `Fields<StatusError>`: the fields that the interface {@link StatusError} declares,
 * without `_tag`.
 *
 * @since 1.0.0
 * @category errors
 */
export const StatusError: new(args: Fields<StatusError>) => StatusError = internal.StatusError

/**
 * @since 1.0.0
 * @category errors
 */
export interface StatusError extends Cause.YieldableError {
  readonly _tag: "StatusError"
  /** The response's status (408, 409, 429 or a 5xx). */
  readonly status: number
  /** A detached copy of the response: at most 64 KiB of its body, its connection already released. */
  readonly response: HttpClientResponse.HttpClientResponse
}

/**
 * Where in the cause chain of a transport error an error code says the connection was never made (eight
 * levels at most); `undefined` when none does, and the request may have been sent.
 *
 * @since 1.0.0
 * @category classification
 */
export const connectFailureReason: (cause: unknown) => ConnectFailureReason | undefined = core.connectFailureReason
