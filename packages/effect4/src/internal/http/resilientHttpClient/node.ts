/**
 * `ResilientHttpClient/Node`: the preset over `NodeHttpClient.layerUndiciOptions`, an undici agent of the layer's
 * own with the connect timeout set. undici fails a connection not made in time with `UND_ERR_CONNECT_TIMEOUT`,
 * which the client's transport classification reads as `ConnectFailed` ("timeout"); Effect's undici client turns
 * undici's own header and body timeouts off, so every other wait is the attempt timeout's (`NoResponse`).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Layer } from "effect"
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
  const resilient = layer(clientOptions) // checks the client's options now, like every constructor
  return resilient.pipe(Layer.provide(NodeHttpClient.layerUndiciOptions({ connect: { timeout } })))
}
