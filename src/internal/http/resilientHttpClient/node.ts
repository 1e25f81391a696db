import { HttpClient } from "@effect/platform"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Undici from "@effect/platform-node/Undici"
import { Effect, Layer } from "effect"
import type { NodeOptions } from "../../../ResilientHttpClient/Node.js"
import * as validate from "../../validate.js"
import { layer } from "./make.js"

export const layerNode = (options: NodeOptions = {}) => {
  if (typeof options !== "object" || options === null) validate.invalid("ResilientHttpClient options must be an object")
  const { connectTimeout, ...clientOptions } = options
  const connectMillis = validate.millis("ResilientHttpClient connectTimeout", connectTimeout ?? "3 seconds")
  const resilient = layer(clientOptions) // checks the options now, like every constructor
  return Layer.unwrapScoped(Effect.gen(function*() {
    const dispatcher = yield* Effect.acquireRelease(
      Effect.sync(() => new Undici.Agent({ connect: { timeout: connectMillis } })),
      (agent) => Effect.promise(() => agent.close())
    )
    return resilient.pipe(
      Layer.provide(Layer.succeed(HttpClient.HttpClient, NodeHttpClient.makeUndici(dispatcher)))
    )
  }))
}
