/**
 * The HTTP side of the idempotency middleware's decisions, as plain data: which answer a request gets when
 * it is not admitted (400, 409, 413, 422, 503), which answers are stored for replay, which headers a replay
 * repeats, and how store failures are logged without key material. The store's own claim logic lives
 * beside the stores; the middleware turns these descriptions into responses.
 */
import { rateLimit, rateLimitPolicy, retryAfter } from "./httpHeaders.js"
import type { Problem } from "./problem.js"

/**
 * The response headers a replay repeats, beside the status and the body: what describes the stored
 * representation and what asks the client to do something. Never `Set-Cookie` (a session must not be
 * handed to whoever replays the key).
 */
export const defaultReplayHeaders: ReadonlyArray<string> = [
  "cache-control",
  "content-disposition",
  "content-encoding",
  "content-language",
  "content-location",
  "content-type",
  "etag",
  "expires",
  "last-modified",
  "link",
  "location",
  rateLimit,
  rateLimitPolicy,
  retryAfter,
  "vary"
]

/** Headers no option can add to the replayed ones. */
export const neverReplayed: ReadonlySet<string> = new Set(["set-cookie", "set-cookie2"])

/** Says, on the first answer and on replays, that the stored response kept its status and headers only. */
export const bodyOmittedHeader = "idempotent-replay-body"

/** Set on every replayed answer. */
export const replayedHeader = "idempotent-replayed"

/**
 * Whether a handler's answer is kept as the key's answer. A 429 or 503 asks the client to come back: it is
 * never kept. Other 5xx follow `storeServerErrors`, then `storeStatus` decides.
 */
export const keeps = (
  status: number,
  storeServerErrors: boolean,
  storeStatus: (status: number) => boolean
): boolean => status !== 429 && status !== 503 && (status < 500 || storeServerErrors) && storeStatus(status)

/** {@link keeps} for a defect's 500: a `storeStatus` that throws keeps it (the handler may have committed). */
export const keepsDefect = (storeServerErrors: boolean, storeStatus: (status: number) => boolean): boolean => {
  try {
    return keeps(500, storeServerErrors, storeStatus)
  } catch {
    return true
  }
}

export const keyMissing = (method: string, headerName: string): Problem => ({
  status: 400,
  type: "idempotency-key-missing",
  title: "Idempotency-Key header required",
  detail: `${method} requests to this endpoint need an ${headerName} header`
})

export const keyInvalid = (maxKeyLength: number): Problem => ({
  status: 400,
  type: "idempotency-key-invalid",
  title: "Invalid Idempotency-Key",
  detail: `the key must be 1 to ${maxKeyLength} printable ASCII characters (a token or a quoted string)`
})

export const bodyUnreadable: Problem = {
  status: 400,
  type: "body-unreadable",
  title: "The request body could not be read"
}

/**
 * The body was read before the middleware, and what the platform kept of it does not give its bytes back (see
 * `bodyOfText` in idempotency.ts): the request is refused rather than fingerprinted, and handled, with other bytes.
 * A server's fault, not the client's.
 */
export const bodyConsumed: Problem = {
  status: 500,
  type: "body-consumed",
  title: "The request body could not be recovered",
  detail: "the request was not processed: its body was read before it could be fingerprinted, and its bytes are gone"
}

export const tooLarge = (maxBodyBytes: number): Problem => ({
  status: 413,
  type: "body-too-large",
  title: "Request body too large",
  detail: `idempotent requests may carry at most ${maxBodyBytes} bytes`,
  headers: { connection: "close" }
})

/** Whether a declared `Content-Length` already rules the body out (a malformed one is left to the read). */
export const declaredTooLarge = (contentLength: string | undefined, maxBodyBytes: number): boolean =>
  Number(contentLength ?? "0") > maxBodyBytes

export const mismatch: Problem = {
  status: 422,
  type: "idempotency-key-reused",
  title: "Idempotency-Key reused with a different request",
  detail: "this key was first used with another method, target or body"
}

export const inProgress: Problem = {
  status: 409,
  type: "idempotency-key-in-progress",
  title: "A request with this Idempotency-Key is still in progress",
  detail: "retry after the first request has finished",
  headers: { [retryAfter]: "1" }
}

export const storeUnavailable: Problem = {
  status: 503,
  type: "idempotency-store-unavailable",
  title: "Idempotency store unavailable",
  detail: "the request was not processed; retry it with the same Idempotency-Key",
  headers: { [retryAfter]: "1" }
}

export const storeFull: Problem = {
  status: 503,
  type: "idempotency-store-full",
  title: "Idempotency store full",
  detail: "the request was not processed: no new key can be remembered now; retry it with the same Idempotency-Key",
  headers: { [retryAfter]: "60" }
}

/** Replaces the key and the scope digest in a text: logs must not carry key material. */
export const redactor = (key: string, scope: string) => (text: string): string =>
  text.split(key).join("<key>").split(scope).join("<scope>")

/** An error and the chain of its causes (five at most), as one line of text. */
export const describe = (error: unknown): string => {
  const parts: Array<string> = []
  let current: unknown = error
  for (let depth = 0; current !== undefined && current !== null && depth < 5; depth++) {
    if (current instanceof Error) {
      parts.push(`${current.name}: ${current.message}`)
      current = (current as { cause?: unknown }).cause
    } else {
      parts.push(String(current))
      break
    }
  }
  return parts.join(" <- ")
}
