/**
 * Whether a failed HTTP request may be sent again (RFC 9110 §9.2.2 and §15), from plain data: the method,
 * what is known about the request (never left, may have run, a status arrived) and whether it carries an
 * Idempotency-Key. The `HttpClassify` module documents the table; the resilient client calls these.
 */

/** The request never left the client. */
export interface NotSent {
  readonly _tag: "NotSent"
}

/** The request may have run; no response arrived. */
export interface UnknownOutcome {
  readonly _tag: "UnknownOutcome"
}

/** A response arrived with this status code. */
export interface Status {
  readonly _tag: "Status"
  readonly code: number
}

export type Outcome = NotSent | UnknownOutcome | Status

export type Decision = "retry" | "fatal"

export interface Request {
  readonly method: string
  readonly outcome: Outcome
  readonly hasIdempotencyKey?: boolean | undefined
}

export const notSent: NotSent = Object.freeze({ _tag: "NotSent" })

export const unknownOutcome: UnknownOutcome = Object.freeze({ _tag: "UnknownOutcome" })

export const status = (code: number): Status => Object.freeze({ _tag: "Status", code })

// private copies: mutating the exported sets through a cast cannot change a decision
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"])
const RETRYABLE = new Set([408, 429, 500, 502, 503, 504])

export const idempotentMethods: ReadonlySet<string> = new Set(IDEMPOTENT)

export const retryableStatuses: ReadonlySet<number> = new Set(RETRYABLE)

const lowerAscii = /[a-z]/g

/** ASCII case-insensitive, so a look-alike method with non-ASCII letters is not idempotent. */
export const isIdempotentMethod = (method: string): boolean =>
  typeof method === "string" && IDEMPOTENT.has(method.replace(lowerAscii, (c) => c.toUpperCase()))

export const isRetryableStatus = (code: number): boolean => RETRYABLE.has(code)

/** Total: anything unrecognised, including input of the wrong shape, is `"fatal"`. */
export const classify = (request: Request): Decision => {
  const outcome = request?.outcome as Outcome | undefined
  const safeToRepeat = request?.hasIdempotencyKey === true || isIdempotentMethod(request?.method)
  switch (outcome?._tag) {
    case "NotSent":
      return "retry"
    case "UnknownOutcome":
      return safeToRepeat ? "retry" : "fatal"
    case "Status":
      return safeToRepeat && RETRYABLE.has(outcome.code) ? "retry" : "fatal"
    default:
      return "fatal"
  }
}

/** Whether a response with `code` to this request is retried rather than returned. */
export const retriesStatus = (method: string, code: number, hasIdempotencyKey: boolean): boolean =>
  RETRYABLE.has(code) && classify({ method, outcome: status(code), hasIdempotencyKey }) === "retry"

/** Statuses whose Retry-After is honoured (RFC 9110 names 503 and 3xx; RFC 6585 429; 413 as urllib3 does). */
const RETRY_AFTER_STATUSES = new Set([413, 429, 503])

export const honoursRetryAfter = (code: number): boolean => RETRY_AFTER_STATUSES.has(code)

/**
 * Whether a retried status counts as an outage for a circuit breaker: a 429 does not (a server that
 * throttles is working as designed, and the retry already honours it).
 */
export const statusIsOutage = (code: number): boolean => code !== 429

export type ConnectFailureReason = "timeout" | "refused" | "dns" | "unreachable"

const NOT_SENT_CODES: Readonly<Record<string, ConnectFailureReason>> = {
  ECONNREFUSED: "refused",
  UND_ERR_CONNECT_TIMEOUT: "timeout",
  ENOTFOUND: "dns",
  EAI_AGAIN: "dns",
  EHOSTUNREACH: "unreachable",
  ENETUNREACH: "unreachable",
  EADDRNOTAVAIL: "unreachable"
}

/**
 * The reason a connection was never made, read from the first error `code` in the cause chain (eight
 * levels at most) that says so; `undefined` when none does, and the request may have been sent.
 */
export const connectFailureReason = (cause: unknown): ConnectFailureReason | undefined => {
  let current: unknown = cause
  for (let depth = 0; depth < 8 && typeof current === "object" && current !== null; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === "string" && Object.hasOwn(NOT_SENT_CODES, code)) return NOT_SENT_CODES[code]
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}
