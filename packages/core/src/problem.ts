/**
 * RFC 9457 problem details, as plain data: every server middleware (idempotency, deadline, rate limit, load
 * shedding, client scope) describes its refusals as a {@link Problem}, and one helper turns it into a
 * problem+json response.
 */

/** An RFC 9457 problem answer, before it becomes a response. A short `type` is a name under the library's URN. */
export interface Problem {
  readonly status: number
  readonly type: string
  readonly title: string
  readonly detail?: string
  readonly headers?: Readonly<Record<string, string>>
}

/** The problem+json body of a {@link Problem}: a short `type` becomes `urn:effect-resilience:problem:<type>`. */
export const problemBody = (problem: Problem): {
  readonly type: string
  readonly title: string
  readonly status: number
  readonly detail?: string
} => ({
  type: problem.type.includes(":") ? problem.type : `urn:effect-resilience:problem:${problem.type}`,
  title: problem.title,
  status: problem.status,
  ...(problem.detail === undefined ? {} : { detail: problem.detail })
})
