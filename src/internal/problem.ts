import { HttpServerResponse } from "@effect/platform"

/**
 * An RFC 9457 problem+json response. `type` is a URI naming the kind of problem: a short name becomes
 * `urn:effect-resilience:problem:<name>`; a full URI (e.g. IANA's `quota-exceeded`) is kept.
 */
export const problem = (options: {
  readonly status: number
  readonly type: string
  readonly title: string
  readonly detail?: string
  readonly headers?: Readonly<Record<string, string>>
}): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(
    {
      type: options.type.includes(":") ? options.type : `urn:effect-resilience:problem:${options.type}`,
      title: options.title,
      status: options.status,
      ...(options.detail === undefined ? {} : { detail: options.detail })
    },
    {
      status: options.status,
      contentType: "application/problem+json",
      ...(options.headers === undefined ? {} : { headers: options.headers })
    }
  )
