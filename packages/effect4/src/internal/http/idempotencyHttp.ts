import { Effect, Stream } from "effect"
import { Headers, HttpBody, HttpServerResponse } from "effect/http"
import { replayedHeader } from "../../core/idempotencyResponse.js"
import type { StoredResponse } from "../../IdempotencyStore.js"
import { concat } from "./requestBody.js"

/**
 * The HTTP side of the idempotency middleware: turning a response into what a store keeps and back (the
 * request body is read by `requestBody.ts`).
 */

export interface Captured {
  /** The whole body when it is known as bytes (to answer with); `undefined` to answer with the response as is. */
  readonly bytes: Uint8Array | undefined
  /** Whether the body can be stored: known as bytes, and at most `maxResponseBytes`. */
  readonly storable: boolean
}

/** The response body as bytes, and whether it may be stored (form data and unknown raw bodies cannot). */
export const captureBody = (
  response: HttpServerResponse.HttpServerResponse,
  max: number
): Effect.Effect<Captured> => {
  const body = response.body
  const known = (bytes: Uint8Array): Captured => ({ bytes, storable: bytes.byteLength <= max })
  switch (body._tag) {
    case "Empty":
      return Effect.succeed(known(new Uint8Array(0)))
    case "Uint8Array":
      return Effect.succeed(known(body.body))
    case "Raw":
      if (typeof body.body === "string") return Effect.succeed(known(new TextEncoder().encode(body.body)))
      if (body.body instanceof Uint8Array) return Effect.succeed(known(body.body))
      return Effect.succeed({ bytes: undefined, storable: false })
    case "Stream":
      // read whole here (the answer must be known before it is stored); a body stream that fails is a defect
      return Effect.orDie(
        Effect.map(Stream.runCollect(body.stream), (chunks) => known(concat(chunks)))
      )
    case "FormData":
      return Effect.succeed({ bytes: undefined, storable: false })
  }
}

const contentTypeOf = (response: HttpServerResponse.HttpServerResponse): string | undefined =>
  (response.body._tag === "Empty" || response.body._tag === "FormData" ? undefined : response.body.contentType) ??
    response.headers["content-type"]

export const pickHeaders = (
  response: HttpServerResponse.HttpServerResponse,
  names: ReadonlySet<string>
): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(response.headers)) {
    if (names.has(name)) out[name] = value
  }
  const contentType = contentTypeOf(response)
  if (contentType !== undefined) out["content-type"] = contentType
  return out
}

export const withBytes = (response: HttpServerResponse.HttpServerResponse, bytes: Uint8Array) =>
  response.body._tag === "Uint8Array"
    ? response
    : HttpServerResponse.setBody(response, HttpBody.uint8Array(bytes, contentTypeOf(response)))

export const replay = (stored: StoredResponse) => {
  const { "content-type": contentType, ...rest } = stored.headers
  return HttpServerResponse.uint8Array(stored.body, {
    status: stored.status,
    headers: Headers.fromInput({ ...rest, [replayedHeader]: "true" }),
    ...(contentType === undefined ? {} : { contentType })
  })
}
