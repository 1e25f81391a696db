import { type Problem, problemBody } from "@effect-resilience/core/problem"
import { HttpServerResponse } from "@effect/platform"

/**
 * An RFC 9457 problem+json response. `type` is a URI naming the kind of problem: a short name becomes
 * `urn:effect-resilience:problem:<name>`; a full URI (e.g. IANA's `quota-exceeded`) is kept.
 */
export const problem = (options: Problem): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(problemBody(options), {
    status: options.status,
    contentType: "application/problem+json",
    ...(options.headers === undefined ? {} : { headers: options.headers })
  })
