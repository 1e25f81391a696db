/**
 * What the demo prints: the table, the reasons clients gave up (in words), and a footer whose every claim
 * is derived from the numbers it sits under (summary.ts); here, how the library's errors read in words.
 */
import { CircuitBreaker, Deadline, HttpErrors, RateLimiter, ResilientHttpClient, Retry } from "effect-resilience"
import { readTimeoutMillis } from "../../../../examples/demo/pattern.js"
import { deadlineSeconds, status } from "../../../../examples/demo/summary.js"

export {
  deadlineSeconds,
  footer,
  intro,
  reasons,
  status,
  type Summary,
  table
} from "../../../../examples/demo/summary.js"

const stopWords: Readonly<Record<Retry.StopReason, (attempts: number) => string>> = {
  attempts: (n) => `gave up after ${n} attempts`,
  deadline: () => `the ${deadlineSeconds} s deadline left no time for another attempt`,
  budget: () => "the retry budget was spent (too many retries across all orders)",
  "retry-after": () => "the service asked to wait longer than the client accepts"
}

/** What went wrong with one attempt or one call, in words. */
export const describe = (error: unknown): string => {
  if (error instanceof Retry.RetriesExhausted) {
    return `${describe(error.last)}; ${stopWords[error.reason](error.attempts)}`
  }
  if (error instanceof HttpErrors.NoResponse) {
    return error.reason === "read-timeout"
      ? `no answer within the ${readTimeoutMillis / 1000} s attempt timeout`
      : "the connection broke before an answer arrived"
  }
  if (error instanceof HttpErrors.ConnectFailed) return `could not connect (${error.reason})`
  if (error instanceof HttpErrors.StatusError) return status(error.status)
  if (error instanceof CircuitBreaker.CircuitOpen) {
    return "the circuit breaker was open: failed fast without calling the service"
  }
  if (error instanceof Deadline.DeadlineExceeded) return `the ${deadlineSeconds} s deadline passed`
  if (error instanceof RateLimiter.RateLimited) return "the client-side rate limiter would not admit it in time"
  if (error instanceof ResilientHttpClient.OriginPaused) {
    return "the service asked every caller to hold off until after the deadline"
  }
  if (typeof error === "object" && error !== null && "_tag" in error) {
    switch (error._tag) {
      case "TimeoutException":
        return `no answer within the ${readTimeoutMillis / 1000} s read timeout`
      case "RequestError":
        return "the connection broke before an answer arrived"
      case "ResponseError":
        return (error as { readonly cause?: unknown }).cause instanceof HttpErrors.NoResponse
          ? `the answer's body did not arrive within the ${readTimeoutMillis / 1000} s attempt timeout`
          : "the answer could not be read"
    }
  }
  return error instanceof Error ? error.message : String(error)
}
