import { replayedHeader } from "@effect-resilience/core/idempotencyResponse"
import { Headers, HttpBody, type HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Chunk, Effect, Stream } from "effect"
import * as crypto from "node:crypto"
import type { StoredResponse } from "../../IdempotencyStore.js"
import { concat } from "./requestBody.js"

/**
 * The HTTP side of the idempotency middleware: turning a response into what a store keeps and back (the
 * request body is read by `requestBody.ts`).
 */

/**
 * `crypto.hash` (Node 20.12 and later): a digest in one call, without the `Hash` object `createHash` makes
 * (~1 µs less a request, measured on Node 20). Older Nodes use `createHash`; the digests are the same.
 */
const oneShot = (crypto as { readonly hash?: (algorithm: string, data: Uint8Array, encoding: "hex") => string }).hash

/** The bytes a fingerprint is taken over, for requests small enough to fit (one buffer, reused). */
const scratch = Buffer.allocUnsafe(16 * 1024)
/** Views of `scratch`'s first bytes, by length: a request of a length seen before allocates no view. */
const views = new Map<number, Uint8Array>()

const viewOf = (length: number): Uint8Array => {
  let view = views.get(length)
  if (view === undefined) {
    if (views.size >= 1024) views.clear()
    views.set(length, view = new Uint8Array(scratch.buffer, scratch.byteOffset, length))
  }
  return view
}

/**
 * The request target as the client sent it, for `core.requestTarget`: the platform's message's own `url` where
 * it has one (a Node message: its request line's target, unparsed), else `originalUrl` (a web request's URL).
 * Never the url a router rewrote: under `HttpRouter.mount` it has lost its prefix, and two mounted endpoints
 * must not answer each other's keys. (On Node `originalUrl` is that same string; the Effect 4
 * edition's platform rebuilds it from the `Host` header, which is why both read the message.)
 */
export const sentTarget = (request: HttpServerRequest.HttpServerRequest): string => {
  const url = (request.source as { readonly url?: unknown } | null | undefined)?.url
  return typeof url === "string" ? url : request.originalUrl
}

/**
 * The fingerprint of a request: the SHA-256, in hex, of `<method> <target>\n` (UTF-8) and the body. Stores
 * compare it with the one a key was first claimed with, so it must never change for the same request.
 */
export const fingerprint = (method: string, target: string, body: Uint8Array): string => {
  const head = `${method} ${target}\n`
  if (oneShot !== undefined && head.length * 3 + body.byteLength <= scratch.length) {
    const at = scratch.write(head, 0, "utf8")
    scratch.set(body, at)
    return oneShot("sha256", viewOf(at + body.byteLength), "hex")
  }
  return crypto.createHash("sha256").update(head).update(body).digest("hex")
}

export interface Captured {
  /** The whole body when it is known as bytes (to answer with); `undefined` to answer with the response as is. */
  readonly bytes: Uint8Array | undefined
  /** Whether the body can be stored: known as bytes, and at most `maxResponseBytes`. */
  readonly storable: boolean
}

const unstorable: Captured = { bytes: undefined, storable: false }
// shared: no one can write into an empty array
const emptyCaptured: Captured = { bytes: new Uint8Array(0), storable: true }

/**
 * {@link captureBody} of a body known without reading anything (every kind but a stream), at once;
 * `undefined` for a stream.
 */
export const capturedNow = (response: HttpServerResponse.HttpServerResponse, max: number): Captured | undefined => {
  const body = response.body
  switch (body._tag) {
    case "Empty":
      return emptyCaptured
    case "Uint8Array":
      return { bytes: body.body, storable: body.body.byteLength <= max }
    case "Raw": {
      const bytes = typeof body.body === "string"
        ? new TextEncoder().encode(body.body)
        : body.body instanceof Uint8Array
        ? body.body
        : undefined
      return bytes === undefined ? unstorable : { bytes, storable: bytes.byteLength <= max }
    }
    case "Stream":
      return undefined
    case "FormData":
      return unstorable
  }
}

/** The response body as bytes, and whether it may be stored (form data and unknown raw bodies cannot). */
export const captureBody = (
  response: HttpServerResponse.HttpServerResponse,
  max: number
): Effect.Effect<Captured> => {
  const now = capturedNow(response, max)
  if (now !== undefined) return Effect.succeed(now)
  const body = response.body as HttpBody.Stream
  // read whole here (the answer must be known before it is stored); a body stream that fails is a defect
  return Effect.orDie(
    Effect.map(Stream.runCollect(body.stream), (chunks) => {
      const bytes = concat(Chunk.toReadonlyArray(chunks))
      return { bytes, storable: bytes.byteLength <= max }
    })
  )
}

const contentTypeOf = (response: HttpServerResponse.HttpServerResponse): string | undefined =>
  response.body.contentType ?? response.headers["content-type"]

export const pickHeaders = (
  response: HttpServerResponse.HttpServerResponse,
  names: ReadonlySet<string>
): Record<string, string> => {
  const out: Record<string, string> = {}
  const headers = response.headers
  for (const name in headers) {
    if (names.has(name)) out[name] = headers[name]!
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
