/**
 * The resilient client over Node's undici transport. This entry point imports `@effect/platform-node` (an
 * optional peer dependency); the package root does not.
 *
 * @since 0.1.0
 */
import type { Duration, Layer } from "effect"
import * as internal from "../internal/http/resilientHttpClient/node.js"
import type { Options, ResilientHttpClient } from "../ResilientHttpClient.js"

/**
 * The client's options and the transport's.
 *
 * @since 0.1.0
 * @category models
 */
export interface NodeOptions extends Options {
  /**
   * undici's connect timeout: a connection not made by then is `ConnectFailed` ("timeout"). Default 3 seconds;
   * `Duration.infinity` leaves only the operating system's own limit. Must be above zero.
   */
  readonly connectTimeout?: Duration.DurationInput
}

/**
 * A layer providing `ResilientHttpClient` over Node's undici transport, configured so that a connect timeout
 * (`connectTimeout`, default 3 seconds) is its own error and classified as "not sent". The undici agent is
 * destroyed when the layer is released: its connections are closed at once, cutting off whatever is still in
 * flight, such as a response body never read. Throws `IllegalArgumentException` for invalid options.
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
 * }).pipe(Effect.scoped, Effect.provide(ResilientHttpClientNode.layer({ connectTimeout: "1 second" })))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options?: NodeOptions) => Layer.Layer<ResilientHttpClient> = internal.layerNode
