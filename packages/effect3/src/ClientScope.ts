/**
 * Who a request comes from, for the server middlewares that keep state per client: the idempotency keys of
 * one client never meet another's, and each client has its own rate-limit quota.
 *
 * A scope must be something the client cannot choose. The default is the address of the connection; behind
 * reverse proxies, {@link address} reads as many `X-Forwarded-For` (or `Forwarded`) hops as you trust; with
 * authentication, a scope function reads the principal your authentication middleware provides (that
 * middleware must run before these ones). Stores and limiters keep only a digest of the scope.
 *
 * @since 0.1.0
 */
import type { HttpApp, HttpServerRequest } from "@effect/platform"
import type { Cause, Effect } from "effect"
import type { Fields } from "./internal/errorFields.js"
import * as internal from "./internal/http/clientScope.js"

/**
 * A function from the request to its client's scope: a non-empty string that identifies the client, or
 * {@link NoClientIdentity} when there is none (the middlewares then refuse the request with a 500 rather
 * than put it in a scope shared with others). It may read services, e.g. the authenticated user.
 *
 * @since 0.1.0
 * @category models
 */
export type ClientScope<R = never> = (
  request: HttpServerRequest.HttpServerRequest
) => Effect.Effect<string, NoClientIdentity, R>

/**
 * A server middleware of this library (`IdempotencyMiddleware`, `RateLimitMiddleware`, `LoadShedMiddleware`,
 * `DeadlineMiddleware`): it wraps an app, keeps its errors and requirements, and adds `R`, what its
 * {@link ClientScope} (or the middleware itself) needs from every request.
 *
 * @since 0.1.0
 * @category models
 */
export type Middleware<R = never> = <E, R1>(app: HttpApp.Default<E, R1>) => HttpApp.Default<E, R1 | R>

/**
 * The request has no client identity: no remote address (a Unix socket, some test servers), a trusted proxy
 * that forwarded none, or no authenticated principal.
 *
 * `new NoClientIdentity({ … })` takes `Fields<NoClientIdentity>`: the fields that the interface
 * {@link NoClientIdentity} declares, without `_tag`.
 *
 * @since 0.1.0
 * @category errors
 */
export const NoClientIdentity: new(args: Fields<NoClientIdentity>) => NoClientIdentity = internal.NoClientIdentity

/**
 * @since 0.1.0
 * @category errors
 */
export interface NoClientIdentity extends Cause.YieldableError {
  readonly _tag: "NoClientIdentity"
  /** Why the request has no identity (e.g. no remote address), for logs and the 500's detail. */
  readonly reason: string
}

/**
 * @since 0.1.0
 * @category models
 */
export interface AddressOptions {
  /**
   * How many reverse proxies in front of this server append to the forwarded header: the client is the
   * address that many hops out (the last entries of the header are the trusted proxies' own). Default 0:
   * the connection's address, and the header is ignored (a client can write anything in it). Never set it
   * higher than the proxies you run: each hop too many lets clients choose their scope.
   */
  readonly trustedProxies?: number
  /** The header the trusted proxies append to: `"x-forwarded-for"` (default) or RFC 7239 `"forwarded"`. */
  readonly forwardedHeader?: "x-forwarded-for" | "forwarded"
}

/**
 * The client's IP address: the connection's, or the one `trustedProxies` hops out. Fails with
 * {@link NoClientIdentity} when there is no address or a trusted hop forwarded something that is not one.
 * Throws `IllegalArgumentException` for invalid options.
 *
 * @example
 * ```ts
 * import { ClientScope, IdempotencyMiddleware } from "effect-resilience"
 *
 * // one load balancer in front of the service appends the client's address to X-Forwarded-For
 * const middleware = IdempotencyMiddleware.make({ scope: ClientScope.address({ trustedProxies: 1 }) })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const address: (options?: AddressOptions) => ClientScope = internal.address
