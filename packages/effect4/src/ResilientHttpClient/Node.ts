/**
 * The resilient client over Node's undici transport (`@effect/platform-node` 4's `NodeHttpClient`). This entry point
 * imports `@effect/platform-node` (an optional peer dependency); the package root does not.
 *
 * @since 1.0.0
 */
import type { Duration, Layer } from "effect"
import * as internal from "../internal/http/resilientHttpClient/node.js"
import type { Options, ResilientHttpClient } from "../ResilientHttpClient.js"

/**
 * The client's options and the transport's.
 *
 * @since 1.0.0
 * @category models
 */
export interface NodeOptions extends Options {
  /**
   * undici's connect timeout: a connection not made by then is `ConnectFailed` with reason `"timeout"`, never
   * sent. Default 3 seconds; `Duration.infinity` leaves only the operating system's own limit. Must be above zero.
   * undici's timers tick twice a second, so it fires up to about a second late.
   */
  readonly connectTimeout?: Duration.Input
}

/**
 * A layer providing `ResilientHttpClient` over an undici agent of its own, whose connect timeout
 * (`connectTimeout`, default 3 seconds) is its own error: `ConnectFailed` (`reason: "timeout"`), classified as
 * not sent, so even a POST without an Idempotency-Key is retried. A server that accepts the connection but is slow
 * to answer runs into the attempt timeout instead, `NoResponse` (`reason: "read-timeout"`): it may have run. The
 * agent is destroyed when the layer is released. Throws `IllegalArgumentError` for invalid options.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { ResilientHttpClient } from "effect-resilience"
 * import * as ResilientHttpClientNode from "effect-resilience/ResilientHttpClient/Node"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* ResilientHttpClient.ResilientHttpClient
 *   const response = yield* client.get("http://127.0.0.1:8080/health")
 *   return response.status
 * }).pipe(Effect.provide(ResilientHttpClientNode.layer({ connectTimeout: "1 second", attemptTimeout: "2 seconds" })))
 * ```
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: (options?: NodeOptions) => Layer.Layer<ResilientHttpClient> = internal.layerNode
