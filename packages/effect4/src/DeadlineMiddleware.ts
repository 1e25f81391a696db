/**
 * Server middleware that honours the caller's deadline: it reads the remaining budget from a request header
 * (relative milliseconds, so clock skew between machines does not matter), clamps it to a server maximum,
 * and runs the handler under `Deadline.within`. Everything the handler calls — retries, nested HTTP calls
 * through the resilient client — sees what is left and stops in time.
 *
 * - Header: `Request-Timeout-Ms: <non-negative integer>` by default (`header` option).
 * - A malformed value (anything but ASCII digits) is ignored by default, as if absent: a bad hint must not
 *   break a request. `onMalformed: "reject"` answers 400 instead.
 * - No header: the handler runs under `defaultTimeout` if given, else with no deadline of this middleware.
 * - The effective budget is `min(header, maxTimeout)` (default 60 s).
 * - When the deadline passes, the handler is interrupted and the answer is 504 problem+json.
 *
 * @since 1.0.0
 */
import * as DeadlineHeader from "@effect-resilience/core/deadlineHeader"
import type { Duration } from "effect"
import type { Middleware } from "./ClientScope.js"
import * as internal from "./internal/http/deadlineMiddleware.js"

/**
 * The header carrying the remaining budget in milliseconds, as sent by `ResilientHttpClient`.
 *
 * @since 1.0.0
 * @category constants
 */
export const defaultHeader: typeof internal.defaultHeader = internal.defaultHeader

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /** Default `Request-Timeout-Ms`. */
  readonly header?: string
  /** The largest budget a caller may ask for. Default 60 seconds. */
  readonly maxTimeout?: Duration.Input
  /** The budget when the header is absent (or ignored). Default: none. */
  readonly defaultTimeout?: Duration.Input
  /** What to do with a malformed header: `"ignore"` (default) or `"reject"` with 400. */
  readonly onMalformed?: "ignore" | "reject"
}

/**
 * Parses a relative-milliseconds header value: ASCII digits only, surrounding whitespace allowed.
 *
 * @since 1.0.0
 * @category parsing
 */
export const parseHeader: (value: string) => number | undefined = DeadlineHeader.parse

/**
 * Builds the middleware. Throws `IllegalArgumentError` when called with invalid options (a negative or
 * malformed timeout, an empty header name, an `onMalformed` other than `"ignore"` or `"reject"`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpRouter, HttpServerResponse } from "effect/http"
 * import { DeadlineMiddleware } from "effect-resilience"
 *
 * const withDeadline = DeadlineMiddleware.make({ maxTimeout: "10 seconds", defaultTimeout: "5 seconds" })
 * const search = Effect.succeed(HttpServerResponse.text("ok")).pipe(withDeadline)
 * const SearchRoute = HttpRouter.add("GET", "/search", search)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (options?: Options) => Middleware = internal.make
