import { ByteSize, Effect, Stream } from "effect"
import type { HttpServerRequest } from "effect/http"
import { HttpIncomingMessage, HttpServerError, Multipart, UrlParams } from "effect/http"
import type { Readable } from "node:stream"

/**
 * Reading a request body once, and handing it to the app again: the load-shed middleware reads it before
 * admission (an upload must not hold a slot), the idempotency middleware to fingerprint it.
 */

/** The body a request made by {@link withBody} carries, so a later reader takes its bytes as they are. */
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

/**
 * A body read: its bytes, or why there are none. `"consumed"`: something before us read it, and the request we were
 * given kept nothing of it (see {@link readAgain}); no other bytes stand in for them.
 */
export type Body = Uint8Array | "too-large" | "unreadable" | "consumed"

/**
 * Reads the body, at most `max` bytes. A body {@link withBody} already read is taken as it is. On Node the
 * request stream is read directly while nothing has read it yet: past `max` the rest is discarded as it
 * arrives (not kept), so the client still gets its 413 instead of a reset connection. A web request's stream
 * is read with the same bound. A body something else read first comes from the platform's cache, under
 * `MaxBodySize` ({@link readAgain}).
 */
export const readBody = (request: HttpServerRequest.HttpServerRequest, max: number): Effect.Effect<Body> => {
  const now = readBodyNow(request, max)
  return typeof now === "string" || now instanceof Uint8Array ? Effect.succeed(now) : now
}

/**
 * {@link readBody}, with the body itself when it needs no wait (a body {@link withBody} already read, or a Node
 * message received whole, see {@link receivedWhole}), else the effect that reads it: a caller handed most bodies
 * at once then runs no effect for them.
 */
export const readBodyNow = (
  request: HttpServerRequest.HttpServerRequest,
  max: number
): Uint8Array | "too-large" | Effect.Effect<Body> => {
  const known = (request as Partial<Carrier>)[buffered]?.bytes
  if (known !== undefined) return known.byteLength > max ? "too-large" : known
  const source = request.source as Partial<Readable> | undefined
  if (
    source !== undefined && typeof source.on === "function" && typeof source.resume === "function" &&
    source.readableDidRead === false && source.readableEnded === false
  ) {
    const whole = receivedWhole(source as Readable & { readonly complete?: unknown }, max)
    return whole === undefined ? readNode(source as Readable, max) : whole
  }
  if (source instanceof Request && !source.bodyUsed) return readWeb(source, max)
  return readAgain(request, max)
}

/**
 * A body something before us read (a logger, an HMAC check): Effect 4's requests keep the bytes once read, as the
 * cached `arrayBuffer` (`text`, `json` and `urlParamsBody` read through it), so they come from there. A request with
 * nothing cached (`arrayBufferEffect`) had its body read some other way (`stream`, `multipart`), or is a copy made
 * with `request.modify` since (a router's prefix, `HttpMiddleware.xForwardedHeaders`), which starts without the
 * cache: its `arrayBuffer` would read the spent stream again and find it empty. Its bytes are gone then:
 * `"consumed"`, never other bytes, unless it declares no body at all ({@link declaresNoBody}).
 */
const readAgain = (request: HttpServerRequest.HttpServerRequest, max: number): Effect.Effect<Body> => {
  if ((request as { readonly arrayBufferEffect?: unknown }).arrayBufferEffect === undefined) {
    return Effect.succeed(declaresNoBody(request) ? new Uint8Array(0) : "consumed")
  }
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

/**
 * Whether the request says it has no body at all: a `Content-Length` of 0, or a Node message over HTTP/1 with
 * neither `Content-Length` nor `Transfer-Encoding` (RFC 9112 §6.3; an HTTP/2 body needs neither).
 */
const declaresNoBody = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const length = request.headers["content-length"]
  if (length !== undefined) return length.trim() === "0"
  const source = request.source as { readonly httpVersionMajor?: unknown } | null | undefined
  return source?.httpVersionMajor === 1 && request.headers["transfer-encoding"] === undefined
}

/**
 * A small body usually arrives with its headers, so the whole message was received before the app runs:
 * Node's `IncomingMessage` says so with `complete`, and its stream then holds all of it. It is taken at once
 * (`read()` hands out everything buffered), without a listener or a wait for the stream's `end`; otherwise
 * `undefined`, and the body is read as it arrives.
 */
const receivedWhole = (
  stream: Readable & { readonly complete?: unknown },
  max: number
): Uint8Array | "too-large" | undefined => {
  if (stream.complete !== true || stream.readableObjectMode !== false || stream.readableFlowing === true) {
    return undefined
  }
  const chunk: unknown = stream.read()
  if (chunk === null) return stream.readableLength === 0 ? new Uint8Array(0) : undefined
  const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk as Uint8Array
  return bytes.byteLength > max ? "too-large" : bytes
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

/** What a request made by {@link withBody} keeps: the bytes, their text once decoded, and the request it wraps. */
interface Buffered {
  readonly bytes: Uint8Array
  readonly request: HttpServerRequest.HttpServerRequest
  text: string | undefined
}
interface Carrier {
  readonly [buffered]: Buffered
}

const decodedOf = (self: Carrier): string => self[buffered].text ??= new TextDecoder().decode(self[buffered].bytes)
const decodeError = (self: Carrier) => (cause: unknown) =>
  new HttpServerError.HttpServerError({
    reason: new HttpServerError.RequestParseError({ request: self[buffered].request, cause })
  })

/**
 * The readers of a request made by {@link withBody}, defined once (getters of `this`), so a request costs an
 * object and three fields instead of a set of closures and property descriptors.
 */
const readers: PropertyDescriptorMap = {
  arrayBuffer: {
    get(this: Carrier) {
      const bytes = this[buffered].bytes
      return Effect.succeed(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
    }
  },
  text: {
    get(this: Carrier) {
      return Effect.sync(() => decodedOf(this))
    }
  },
  json: {
    get(this: Carrier) {
      return Effect.try({ try: () => JSON.parse(decodedOf(this)) as unknown, catch: decodeError(this) })
    }
  },
  urlParamsBody: {
    get(this: Carrier) {
      return Effect.try({
        try: () => UrlParams.fromInput(new URLSearchParams(decodedOf(this))),
        catch: decodeError(this)
      })
    }
  },
  stream: {
    get(this: Carrier) {
      return Stream.succeed(this[buffered].bytes)
    }
  },
  // multipart bodies too, parsed from the bytes already read (the connection's stream is spent)
  multipartStream: {
    get(this: Carrier) {
      return multipartOf(this[buffered].request, this[buffered].bytes)
    }
  },
  multipart: {
    get(this: Carrier) {
      return Multipart.toPersisted(multipartOf(this[buffered].request, this[buffered].bytes))
    }
  },
  // routers with prefixes rewrite the url through `modify`: the copy must keep the body read here
  modify: {
    value(this: Carrier, options: Parameters<HttpServerRequest.HttpServerRequest["modify"]>[0]) {
      return withBody(this[buffered].request.modify(options), this[buffered].bytes)
    }
  }
}

/**
 * The prototype of the requests {@link withBody} makes from requests of one prototype: that prototype with
 * the readers on top, made once (`null` when its requests cannot be copied, see {@link copyable}).
 */
const derived = new WeakMap<object, object | null>()

/**
 * Whether a request can be copied field by field (`Object.assign`) onto an object of its derived prototype:
 * its own properties are all plain, enumerable data (class fields), so the copy behaves as the request does.
 * Checked on the first request of each prototype (the instances of a class have the same fields).
 */
const copyable = (request: object): boolean =>
  Object.values(Object.getOwnPropertyDescriptors(request)).every((d) => "value" in d && d.enumerable === true) &&
  Object.getOwnPropertySymbols(request).every((s) => Object.prototype.propertyIsEnumerable.call(request, s))

/**
 * The request with its body already read, so the app can read it again: a copy of the request's fields on a
 * prototype made once per request class. Making each request the prototype of its own wrapper
 * (`Object.create(request, readers)`) costs V8 a new hidden class and a slow object per request (~14 µs
 * against ~0.3 µs for the copy, measured on Node 20), and slows every later read of the request's fields. The
 * requests of a class whose own properties are not plain fields are wrapped that way still.
 */
export const withBody = (
  request: HttpServerRequest.HttpServerRequest,
  bytes: Uint8Array
): HttpServerRequest.HttpServerRequest => {
  const proto = Object.getPrototypeOf(request) as object | null
  let base = proto === null ? null : derived.get(proto)
  if (base === undefined) {
    base = copyable(request) ? Object.create(proto, readers) as object : null
    derived.set(proto!, base)
  }
  const self = base === null ? Object.create(request, readers) : Object.assign(Object.create(base), request)
  self[buffered] = { bytes, request, text: undefined } satisfies Buffered
  return self
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
