import { type Layer, Logger } from "effect"

/** The services the integration suites use: gating (`describeRedis`, `describePg`) and their URLs. */
export { blackHole, closedPort, deleteKeys, hashTag, uniquePrefix } from "../support/redis.js"
export { DATABASE_URL, describePg, describeRedis, REDIS_URL } from "../support/services.js"

/** A logger layer that keeps each log's text (Effect 4: `Logger.layer`). */
export const loggedMessages = (messages: Array<string>): Layer.Layer<never> =>
  Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => messages.push(String(message))))
