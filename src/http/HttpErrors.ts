/**
 * Typed errors of the resilient HTTP client, named by what is known about the request rather than by
 * the socket error behind them:
 *
 * - {@link ConnectFailed}: the request never left (refused, connect timeout, DNS, unreachable). Always safe to retry.
 * - {@link UnknownOutcome}: the request was (or may have been) sent, and no response arrived (read timeout,
 *   connection reset). The server may have run it: retry only an idempotent method or a request with an
 *   Idempotency-Key.
 * - {@link StatusError}: a response arrived with a status worth retrying (408, 429, 5xx) — it is only
 *   seen inside `RetriesExhausted` when retries ran out; other statuses are returned as responses.
 *
 * @since 0.1.0
 */
import type { HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { Data } from "effect"

/**
 * @since 0.1.0
 * @category errors
 */
export class ConnectFailed extends Data.TaggedError("ConnectFailed")<{
  readonly reason: "timeout" | "refused" | "dns" | "unreachable"
  readonly request: HttpClientRequest.HttpClientRequest
  readonly cause: unknown
}> {
  override get message(): string {
    return `could not connect (${this.reason}) for ${this.request.method} ${this.request.url}`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class UnknownOutcome extends Data.TaggedError("UnknownOutcome")<{
  readonly reason: "read-timeout" | "reset"
  readonly request: HttpClientRequest.HttpClientRequest
  readonly cause: unknown
}> {
  override get message(): string {
    return `no response (${this.reason}) for ${this.request.method} ${this.request.url}: it may have run`
  }
}

/**
 * @since 0.1.0
 * @category errors
 */
export class StatusError extends Data.TaggedError("StatusError")<{
  readonly status: number
  readonly response: HttpClientResponse.HttpClientResponse
}> {
  override get message(): string {
    return `HTTP ${this.status} for ${this.response.request.method} ${this.response.request.url}`
  }
}

const notSentCodes: Record<string, ConnectFailed["reason"]> = {
  ECONNREFUSED: "refused",
  UND_ERR_CONNECT_TIMEOUT: "timeout",
  ENOTFOUND: "dns",
  EAI_AGAIN: "dns",
  EHOSTUNREACH: "unreachable",
  ENETUNREACH: "unreachable",
  EADDRNOTAVAIL: "unreachable"
}

/**
 * Where in the cause chain of a transport error an error code says the connection was never made.
 * Everything else after the request started is an unknown outcome.
 *
 * @since 0.1.0
 * @category classification
 */
export const connectFailureReason = (cause: unknown): ConnectFailed["reason"] | undefined => {
  let current: unknown = cause
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === "string" && code in notSentCodes) return notSentCodes[code]
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}
