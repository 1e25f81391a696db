/**
 * The header names the client's combinators and the server's middlewares share, in one place: a client and a
 * server of this library agree on them by importing these, never each other's modules. Lower case, as
 * `@effect/platform` keys request and response headers; {@link spelled} gives each as its specification writes
 * it, for messages (field names are case-insensitive on the wire).
 */

/** The key of a logical request (draft-ietf-httpapi-idempotency-key-header): one per request, kept by retries. */
export const idempotencyKey = "idempotency-key"

/** The time the caller has left, in whole milliseconds (`DeadlineMiddleware`). */
export const requestTimeout = "request-timeout-ms"

/** The caller's criticality: `critical`, `default` or `sheddable` (`LoadShedMiddleware`). */
export const criticality = "request-criticality"

/** When to come back (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. */
export const retryAfter = "retry-after"

/** The quota left (draft-ietf-httpapi-ratelimit-headers). */
export const rateLimit = "ratelimit"

/** The quota policies (draft-ietf-httpapi-ratelimit-headers). */
export const rateLimitPolicy = "ratelimit-policy"

/** Each shared name as its specification spells it. */
export const spelled = {
  [idempotencyKey]: "Idempotency-Key",
  [requestTimeout]: "Request-Timeout-Ms",
  [criticality]: "Request-Criticality",
  [retryAfter]: "Retry-After",
  [rateLimit]: "RateLimit",
  [rateLimitPolicy]: "RateLimit-Policy"
} as const
