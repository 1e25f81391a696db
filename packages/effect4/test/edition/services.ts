import { Layer, Logger } from "effect"

/** The services the integration suites use: gating (`describeRedis`, `describePg`) and their URLs. */
export { blackHole, closedPort, deleteKeys, hashTag, uniquePrefix } from "../support/redis.js"
export { DATABASE_URL, describePg, describeRedis, REDIS_URL } from "../support/services.js"

/** A logger layer that keeps each log's text (Effect 4 passes a message as the array of what was logged). */
export const loggedMessages = (messages: Array<string>): Layer.Layer<never> =>
  Logger.layer([Logger.make(({ message }) => messages.push(String(Array.isArray(message) ? message[0] : message)))])
