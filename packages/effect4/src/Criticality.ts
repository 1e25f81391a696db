/**
 * How much a piece of work matters when there is not enough capacity for all of it: `critical` (a user is
 * waiting and nothing can replace it), `default`, or `sheddable` (a prefetch, a batch job, a retry that can come
 * later). The fiber carries it like the deadline: set it once around a request and every call inside it, across
 * forks, sees it; `ResilientHttpClient` sends it in the `Request-Criticality` header, and the server's load
 * shedding refuses `sheddable` work first.
 *
 * A criticality from the network is a claim, not a fact: a server should accept `critical` only from callers it
 * trusts (see `LoadShedMiddleware`).
 *
 * @since 1.0.0
 */
import type * as core from "@effect-resilience/core/criticality"
import type { Effect } from "effect"
import * as internal from "./internal/criticality.js"

/**
 * @since 1.0.0
 * @category models
 */
export type Criticality = core.Criticality

/**
 * The criticality of the current fiber: what the nearest enclosing {@link withCriticality} set, else `"default"`.
 *
 * @since 1.0.0
 * @category getters
 */
export const current: Effect.Effect<Criticality> = internal.current

/**
 * Runs an effect, and everything it forks, at a criticality. Throws `IllegalArgumentError` for a value
 * that is not one of the three.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Criticality } from "effect-resilience"
 *
 * declare const warmCache: Effect.Effect<void>
 *
 * // a background refresh: the first thing a busy server may refuse
 * const refresh = warmCache.pipe(Criticality.withCriticality("sheddable"))
 * ```
 *
 * @since 1.0.0
 * @category combinators
 */
export const withCriticality: {
  (level: Criticality): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, level: Criticality): Effect.Effect<A, E, R>
} = internal.withCriticality

/**
 * Reads a header value strictly: one of the three names (any case, surrounding spaces ignored); anything else,
 * a list included, is `undefined`, so a malformed value never raises a priority.
 *
 * @since 1.0.0
 * @category parsing
 */
export const parse: (value: string | undefined) => Criticality | undefined = internal.parse

/**
 * The header that carries the criticality between services, lower-cased as `effect/http` keys headers.
 *
 * @since 1.0.0
 * @category constants
 */
export const headerName: string = internal.headerName
