import { ByteSize, Effect, Stream } from "effect"
import type { HttpServerRequest } from "effect/http"
import { HttpIncomingMessage, HttpServerError, Multipart, UrlParams } from "effect/http"
import type { Readable } from "node:stream"

/**
 * Reading a request body once, and handing it to the app again: the load-shed middleware reads it before
 * admission (an upload must not hold a slot), the idempotency middleware to fingerprint it.
 */

/** The bytes a request made by {@link withBody} carries, so a later reader takes them as they are. */
const buffered = Symbol.for("effect-resilience/http/bufferedBody")

/**
 * Whether the request says it has a body (RFC 9112 §6.3: a request with neither `Content-Length` nor
 * `Transfer-Encoding` has none), or already carries one read by {@link withBody}.
 */
export const hasBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  if (buffered in request) return true
  if (request.headers["transfer-encoding"] !== undefined) return true
  const length = request.headers["content-length"]
  return length !== undefined && length.trim() !== "0"
}

export type Body = Uint8Array | "too-large" | "unreadable"

/**
 * Reads the body, at most `max` bytes. A body {@link withBody} already read is taken as it is. On Node the
 * request stream is read directly while nothing has read it yet: past `max` the rest is discarded as it
 * arrives (not kept), so the client still gets its 413 instead of a reset connection. A web request's stream
 * is read with the same bound. Otherwise the platform's (cached) reader is used, under `MaxBodySize`.
 */
export const readBody = (request: HttpServerRequest.HttpServerRequest, max: number): Effect.Effect<Body> => {
  const known = (request as { readonly [buffered]?: Uint8Array })[buffered]
  if (known !== undefined) return Effect.succeed(known.byteLength > max ? "too-large" : known)
  const source = request.source as Partial<Readable> | undefined
  if (
    source !== undefined && typeof source.on === "function" && typeof source.resume === "function" &&
    source.readableDidRead === false && source.readableEnded === false
  ) {
    return readNode(source as Readable, max)
  }
  if (source instanceof Request && !source.bodyUsed) return readWeb(source, max)
  // already read by something before us: the platform caches the body
  return request.arrayBuffer.pipe(
    Effect.map((buffer): Body => buffer.byteLength > max ? "too-large" : new Uint8Array(buffer)),
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(max)),
    Effect.catchIf(
      (e) => e.reason._tag === "RequestParseError" && e.reason.reason === "BodyTooLarge",
      () => Effect.succeed("too-large" as const)
    ),
    Effect.orElseSucceed(() => "unreadable" as const)
  )
}

const readNode = (stream: Readable, max: number) =>
  Effect.callback<Body>((resume) => {
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
    // a reader that gives up (a timeout) leaves the stream draining into nothing: the parts are let go
    return Effect.sync(() => stream.removeListener("data", onData))
  })

/** A web request's body (`HttpEffect.toWebHandler`, tests), read from its stream with the same bound. */
const readWeb = (request: Request, max: number): Effect.Effect<Body> => {
  const body = request.body
  if (body === null) return Effect.succeed(new Uint8Array(0))
  return Effect.acquireUseRelease(
    Effect.sync(() => body.getReader()),
    (reader) =>
      Effect.tryPromise(async (): Promise<Uint8Array | "too-large"> => {
        const parts: Array<Uint8Array> = []
        let size = 0
        for (;;) {
          const { done, value } = await reader.read()
          if (done) return concat(parts)
          size += value.byteLength
          if (size > max) return "too-large"
          parts.push(value)
        }
      }).pipe(Effect.orElseSucceed(() => "unreadable" as const)),
    // a reader that gives up (a timeout, too large) lets the rest go
    (reader) => Effect.sync(() => void reader.cancel().catch(() => {}))
  )
}

const multipartOf = (request: HttpServerRequest.HttpServerRequest, bytes: Uint8Array) =>
  Stream.pipeThroughChannel(Stream.succeed(bytes), Multipart.makeChannel(request.headers))

/** The request with its body already read, so the app can read it again. */
export const withBody = (
  request: HttpServerRequest.HttpServerRequest,
  bytes: Uint8Array
): HttpServerRequest.HttpServerRequest => {
  let text: string | undefined
  const decoded = () => text ??= new TextDecoder().decode(bytes)
  const decodeError = (cause: unknown) =>
    new HttpServerError.HttpServerError({ reason: new HttpServerError.RequestParseError({ request, cause }) })
  return Object.create(request, {
    [buffered]: { value: bytes },
    arrayBuffer: {
      get: () => Effect.succeed(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
    },
    text: { get: () => Effect.sync(decoded) },
    json: { get: () => Effect.try({ try: () => JSON.parse(decoded()) as unknown, catch: decodeError }) },
    urlParamsBody: {
      get: () => Effect.try({ try: () => UrlParams.fromInput(new URLSearchParams(decoded())), catch: decodeError })
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

export const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
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
