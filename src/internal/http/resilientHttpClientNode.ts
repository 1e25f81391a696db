import { HttpClient } from "@effect/platform"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Undici from "@effect/platform-node/Undici"
import { Effect, Layer } from "effect"
import type { Options } from "../../http/ResilientHttpClient.js"
import * as validate from "../validate.js"
import { layer } from "./resilientHttpClient.js"

export const layerNode = (options: Options = {}) => {
  const connectTimeout = validate.millis("ResilientHttpClient connectTimeout", options.connectTimeout ?? "3 seconds")
  const resilient = layer(options) // checks the options now, like every constructor
  return Layer.unwrapScoped(Effect.gen(function*() {
    const dispatcher = yield* Effect.acquireRelease(
      Effect.sync(() => new Undici.Agent({ connect: { timeout: connectTimeout } })),
      (agent) => Effect.promise(() => agent.close())
    )
    return resilient.pipe(
      Layer.provide(Layer.succeed(HttpClient.HttpClient, NodeHttpClient.makeUndici(dispatcher)))
    )
  }))
}
