import { Data, Duration } from "effect"
import type * as Api from "../../CircuitBreaker.js"
import type { Fields } from "../errorFields.js"

export class CircuitOpen extends Data.TaggedError("CircuitOpen")<Fields<Api.CircuitOpen>> {
  override get message(): string {
    return `the circuit is open; retry after ${Duration.format(this.retryAfter)}`
  }
}

/**
 * A rejection is the breaker's normal answer, not a bug: its stack trace says nothing and capturing one
 * costs more than the rest of the rejection, so it is built without.
 */
export const circuitOpen = (
  retryAfter: Duration.Duration,
  opened: { readonly error: unknown } | undefined
): CircuitOpen => {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  const error = new CircuitOpen(opened === undefined ? { retryAfter } : { retryAfter, lastFailure: opened.error })
  Error.stackTraceLimit = limit
  return error
}
