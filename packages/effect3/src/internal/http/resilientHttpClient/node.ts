import { HttpClient } from "@effect/platform"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Undici from "@effect/platform-node/Undici"
import { Effect, Layer } from "effect"
import type { NodeOptions } from "../../../ResilientHttpClient/Node.js"
import * as validate from "../../validate.js"
import { layer } from "./make.js"

/** undici's `connect.timeout` for `connectTimeout`: 0 is undici's "none", for an infinite one (and only for it). */
export const connectMillis = (input: NodeOptions["connectTimeout"]): number => {
  const millis = validate.millis("ResilientHttpClient connectTimeout", input ?? "3 seconds")
  if (millis === 0) {
    validate.invalid("ResilientHttpClient connectTimeout must be above zero (Duration.infinity for none)")
  }
  return Number.isFinite(millis) ? Math.max(1, Math.round(millis)) : 0
}

export const layerNode = (options: NodeOptions = {}) => {
  if (typeof options !== "object" || options === null) validate.invalid("ResilientHttpClient options must be an object")
  const { connectTimeout, ...clientOptions } = options
  const timeout = connectMillis(connectTimeout)
  const resilient = layer(clientOptions) // checks the options now, like every constructor
  return Layer.unwrapScoped(Effect.gen(function*() {
    // Destroyed, not closed, when the layer is released, as @effect/platform-node's own layer (and the Effect 4
    // edition's) does: `close()` waits for every request in flight, and the body of a response nobody reads (a
    // caller that looked at the status only) is never done, so the release, and a graceful shutdown, would never
    // end. Whatever is still in flight then has lost its owner: the layer's users have ended before its release.
    const dispatcher = yield* Effect.acquireRelease(
      Effect.sync(() => new Undici.Agent({ connect: { timeout } })),
      (agent) => Effect.promise(() => agent.destroy())
    )
    return resilient.pipe(
      Layer.provide(Layer.succeed(HttpClient.HttpClient, NodeHttpClient.makeUndici(dispatcher)))
    )
  }))
}
