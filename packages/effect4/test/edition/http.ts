/**
 * HTTP for the server suites (ClientScope, LoadShedMiddleware, RateLimitMiddleware, ServerMiddleware, requestBody):
 * what serving a request in memory looks like in Effect 4 (`effect/http`), under the names the Effect 3 adapter
 * gives `@effect/platform`'s.
 */
import { Option } from "effect"
import type { HttpServerRequest } from "effect/http"

/** The request as if it came from `address` (Effect 3: `request.modify({ remoteAddress })`, a string). */
export const withRemoteAddress = (
  request: HttpServerRequest.HttpServerRequest,
  address: string
): HttpServerRequest.HttpServerRequest => request.modify({ remoteAddress: Option.some(address) })

/** Reading a server request's body once, for the middlewares that look at it (internal in both editions). */
export { readBody, withBody } from "../../src/internal/http/requestBody.js"

/**
 * How many fibers sleep on the TestClock until `wakeAt` (TestClock millis), for a suite that waits until its
 * requests are quiet (Effect 3: counted in `TestClock.sleeps()`; Effect 4: under `recordingSleeps`).
 */
export { sleepersAt } from "../support/sleeps.js"

/** The server's errors and their responses (Effect 3: from "@effect/platform"; Effect 4: from "effect/http"). */
export { HttpServerError } from "effect/http"
