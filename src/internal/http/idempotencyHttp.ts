import type { HttpServerRequest } from "@effect/platform"
import {
  Headers,
  HttpBody,
  HttpIncomingMessage,
  HttpServerError,
  HttpServerResponse,
  Multipart
} from "@effect/platform"
import { Chunk, Effect, Option, Stream } from "effect"
import type { Readable } from "node:stream"
import { replayedHeader } from "../../core/idempotencyResponse.js"
import type { StoredResponse } from "../../IdempotencyStore.js"

/**
 * The HTTP side of the idempotency middleware: reading a request body once (and handing it to the handler
 * again), and turning a response into what a store keeps and back.
 */

/**
 * Reads the body, at most `max` bytes. On Node the request stream is read directly while nothing has read
 * it yet: past `max` the rest is discarded as it arrives (not kept), so the client still gets its 413 instead
 * of a reset connection. Otherwise the platform's (cached) text reader is used, which stops at `max`.
 */
export const readBody = (
  request: HttpServerRequest.HttpServerRequest,
  max: number
): Effect.Effect<Uint8Array | "too-large" | "unreadable"> => {
  const source = request.source as Partial<Readable> | undefined
  if (
    source !== undefined && typeof source.on === "function" && typeof source.resume === "function" &&
    source.readableDidRead === false && source.readableEnded === false
  ) {
    return readNode(source as Readable, max)
  }
  // already read by something before us: the platform caches the body as text (not as bytes)
  return request.text.pipe(
    Effect.map((text): Uint8Array | "too-large" => {
      const bytes = new TextEncoder().encode(text)
      return bytes.byteLength > max ? "too-large" : bytes
    }),
    HttpIncomingMessage.withMaxBodySize(Option.some(max)),
    Effect.orElseSucceed(() => "unreadable" as const)
  )
}

const readNode = (stream: Readable, max: number) =>
  Effect.async<Uint8Array | "too-large" | "unreadable">((resume) => {
    const parts: Array<Uint8Array> = []
    let size = 0
    const onData = (chunk: Uint8Array | string) => {
      const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk
      size += bytes.byteLength
      if (size > max) {
        stream.removeListener("data", onData)
        stream.resume() // keep draining, keep nothing
        resume(Effect.succeed("too-large"))
      } else {
        parts.push(bytes)
      }
    }
    stream.on("data", onData)
    stream.once("end", () => resume(Effect.succeed(concat(parts))))
    stream.once("error", () => resume(Effect.succeed("unreadable")))
    return Effect.sync(() => stream.removeListener("data", onData))
  })

const multipartOf = (request: HttpServerRequest.HttpServerRequest, bytes: Uint8Array) =>
  Stream.pipeThroughChannel(Stream.succeed(bytes), Multipart.makeChannel(request.headers))

/** The request with its body already read, so the handler can read it again. */
export const withBody = (
  request: HttpServerRequest.HttpServerRequest,
  bytes: Uint8Array
): HttpServerRequest.HttpServerRequest => {
  let text: string | undefined
  const decoded = () => text ??= new TextDecoder().decode(bytes)
  const decodeError = (cause: unknown) => new HttpServerError.RequestError({ request, reason: "Decode", cause })
  return Object.create(request, {
    arrayBuffer: {
      get: () => Effect.succeed(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
    },
    text: { get: () => Effect.sync(decoded) },
    json: {
      get: () =>
        Effect.try({ try: () => decoded() === "" ? null : JSON.parse(decoded()) as unknown, catch: decodeError })
    },
    urlParamsBody: {
      get: () =>
        Effect.try({
          try: () => [...new URLSearchParams(decoded()).entries()] as Array<[string, string]>,
          catch: decodeError
        })
    },
    stream: { get: () => Stream.succeed(bytes) },
    // multipart bodies too, parsed from the bytes already read (the connection's stream is spent)
    multipartStream: { get: () => multipartOf(request, bytes) },
    multipart: { get: () => Multipart.toPersisted(multipartOf(request, bytes)) },
    // routers with prefixes rewrite the url through `modify`: the copy must keep the body read here
    modify: {
      value: (options: Parameters<HttpServerRequest.HttpServerRequest["modify"]>[0]) =>
        withBody(request.modify(options), bytes)
    }
  })
}

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
        Effect.map(Stream.runCollect(body.stream), (chunks) => known(concat(Chunk.toReadonlyArray(chunks))))
      )
    case "FormData":
      return Effect.succeed({ bytes: undefined, storable: false })
  }
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  if (parts.length === 1) return parts[0]!
  if (parts.length === 0) return new Uint8Array(0)
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let offset = 0
  for (const part of parts) {
    out.set(part, offset)
    offset += part.byteLength
  }
  return out
}

const contentTypeOf = (response: HttpServerResponse.HttpServerResponse): string | undefined =>
  response.body.contentType ?? response.headers["content-type"]

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
