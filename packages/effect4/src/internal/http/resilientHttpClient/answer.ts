/**
 * What the client's policies read from a response: its `Retry-After` and `RateLimit` fields (parsed once per
 * response, however many policies ask), whether it says a keyed request is still in progress, and a detached
 * copy of it for a response that is going to be retried.
 */
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import { parseRateLimit, type ServiceLimit } from "@effect-resilience/core/rateLimitHeaders"
import * as RetryAfter from "@effect-resilience/core/retryAfter"
import { Effect, Stream } from "effect"
import { HttpClientResponse } from "effect/http"

interface Fields {
  readonly retryAfterMillis: number | undefined
  readonly limits: ReadonlyArray<ServiceLimit> | undefined
}

const parsed = new WeakMap<HttpClientResponse.HttpClientResponse, Fields>()

/**
 * The response's `Retry-After` in milliseconds (a date is read against `now` the first time it is asked) and its
 * `RateLimit` field; `undefined` for a field absent or malformed.
 */
export const fieldsOf = (response: HttpClientResponse.HttpClientResponse, now: number): Fields => {
  let fields = parsed.get(response)
  if (fields === undefined) {
    const retryAfter = response.headers[HttpHeaders.retryAfter]
    const rateLimit = response.headers[HttpHeaders.rateLimit]
    fields = {
      retryAfterMillis: retryAfter === undefined ? undefined : RetryAfter.parse(retryAfter, now),
      limits: rateLimit === undefined ? undefined : parseRateLimit(rateLimit)
    }
    parsed.set(response, fields)
  }
  return fields
}

/**
 * The problem type of `IdempotencyMiddleware`'s 409: the first request with this key is still running. (The
 * middleware also sends `Retry-After`, which is what most servers that say so send.)
 */
export const inProgressType = "urn:effect-resilience:problem:idempotency-key-in-progress"

/**
 * The most of a retried response's body kept in memory. The rest is not read: the response is rebuilt from
 * what was kept, so the connection goes back to the pool (or is closed) at once instead of staying busy
 * until the body is garbage collected, and the caller can still read an error body of a usual size.
 */
const RETAINED_BODY_BYTES = 64 * 1024

/**
 * Reads at most `RETAINED_BODY_BYTES` of the body (stopping the stream there releases the connection) and
 * returns the response rebuilt around them, with the bytes kept. A body that fails to read is left empty.
 */
export const detach = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.suspend(() => {
    const parts: Array<Uint8Array> = []
    let size = 0
    return response.stream.pipe(
      Stream.runForEachWhile((chunk) =>
        Effect.sync(() => {
          const kept = chunk.subarray(0, RETAINED_BODY_BYTES - size)
          parts.push(kept)
          size += kept.byteLength
          return size < RETAINED_BODY_BYTES
        })
      ),
      Effect.orElseSucceed(() => {
        parts.length = 0
      }),
      Effect.map(() => {
        const headers = new Headers()
        for (const [name, value] of Object.entries(response.headers)) headers.set(name, value)
        const body = response.status === 204 || response.status === 304
          ? null
          : new Blob(parts as Array<Uint8Array<ArrayBuffer>>)
        const copy = HttpClientResponse.fromWeb(
          response.request,
          new Response(body, { status: response.status, headers })
        )
        const fields = parsed.get(response)
        if (fields !== undefined) parsed.set(copy, fields)
        return { copy, bytes: parts as ReadonlyArray<Uint8Array> }
      })
    )
  })

/** Whether a detached 409 body is `IdempotencyMiddleware`'s "still in progress" problem. */
export const saysInProgress = (
  response: HttpClientResponse.HttpClientResponse,
  bytes: ReadonlyArray<Uint8Array>
): boolean => {
  if (!(response.headers["content-type"] ?? "").toLowerCase().startsWith("application/problem+json")) return false
  try {
    const decoder = new TextDecoder()
    const text = bytes.map((part) => decoder.decode(part, { stream: true })).join("") + decoder.decode()
    const body: unknown = JSON.parse(text)
    return typeof body === "object" && body !== null && (body as { type?: unknown }).type === inProgressType
  } catch {
    return false
  }
}
