/**
 * HTTP for the server suites (ClientScope, LoadShedMiddleware, RateLimitMiddleware, ServerMiddleware, requestBody):
 * what serving a request in memory looks like in Effect 3 (`@effect/platform`), under the names the Effect 4 adapter
 * gives `effect/http`'s.
 */
import type { HttpServerRequest } from "@effect/platform"

/** The request as if it came from `address` (Effect 4: `request.modify({ remoteAddress: Option.some(address) })`). */
export const withRemoteAddress = (
  request: HttpServerRequest.HttpServerRequest,
  address: string
): HttpServerRequest.HttpServerRequest => request.modify({ remoteAddress: address })

/** Reading a server request's body once, for the middlewares that look at it (internal in both editions). */
export { readBody, withBody } from "../../src/internal/http/requestBody.js"
