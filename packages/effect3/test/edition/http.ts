/**
 * HTTP for the server suites (ClientScope, LoadShedMiddleware, RateLimitMiddleware, ServerMiddleware, requestBody):
 * what serving a request in memory looks like in Effect 3 (`@effect/platform`), under the names the Effect 4 adapter
 * gives `effect/http`'s.
 */
import type { HttpServerRequest } from "@effect/platform"
import { Chunk, Effect, TestClock } from "effect"

/** The request as if it came from `address` (Effect 4: `request.modify({ remoteAddress: Option.some(address) })`). */
export const withRemoteAddress = (
  request: HttpServerRequest.HttpServerRequest,
  address: string
): HttpServerRequest.HttpServerRequest => request.modify({ remoteAddress: address })

/** Reading a server request's body once, for the middlewares that look at it (internal in both editions). */
export { readBody, withBody } from "../../src/internal/http/requestBody.js"

/**
 * How many fibers sleep on the TestClock until `wakeAt` (TestClock millis), for a suite that waits until its
 * requests are quiet (Effect 3: counted in `TestClock.sleeps()`; Effect 4: under `recordingSleeps`).
 */
export const sleepersAt = (wakeAt: number): Effect.Effect<number> =>
  Effect.map(TestClock.sleeps(), (sleeps) => Chunk.filter(sleeps, (at) => at === wakeAt).length)

/** The server's errors and their responses (Effect 3: from "@effect/platform"; Effect 4: from "effect/http"). */
export { HttpServerError } from "@effect/platform"
