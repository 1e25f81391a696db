import { bodyOfText } from "@effect-resilience/core/idempotency"
import type { HttpServerRequest } from "@effect/platform"
import { HttpIncomingMessage, HttpServerError, Multipart } from "@effect/platform"
import { Effect, Option, Stream } from "effect"
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
 * A body read: its bytes, or why there are none. `"consumed"`: something before us read it, and what the platform
 * kept of it does not give back the bytes the client sent (see {@link readAgain}); no other bytes stand in for them.
 */
export type BodyRead = Uint8Array | "too-large" | "unreadable" | "consumed"

/**
 * Reads the body, at most `max` bytes. A body {@link withBody} already read is taken as it is. On Node the
 * request stream is read directly while nothing has read it yet: past `max` the rest is discarded as it
 * arrives (not kept), so the client still gets its 413 instead of a reset connection. A web request's stream is
 * read with the same bound. A body something else read first is taken from what the platform kept of it, when
 * that gives its bytes back ({@link readAgain}).
 */
export const readBody = (request: HttpServerRequest.HttpServerRequest, max: number): Effect.Effect<BodyRead> => {
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
): Uint8Array | "too-large" | Effect.Effect<BodyRead> => {
  const known = (request as Partial<Buffered>)[buffered]?.bytes
  if (known !== undefined) return known.byteLength > max ? "too-large" : known
  const source = request.source as Partial<Readable> | undefined
  const node = source !== undefined && typeof source.on === "function" && typeof source.resume === "function"
  if (node && source.readableDidRead === false && source.readableEnded === false) {
    const whole = receivedWhole(source as Readable & { readonly complete?: unknown }, max)
    return whole === undefined ? readNode(source as Readable, max) : whole
  }
  if (source instanceof Request && !source.bodyUsed) return readWeb(source, max)
  return readAgain(request, node, max)
}

/**
 * A body something before us read (a logger, an HMAC check): the bytes the client sent, from what the platform
 * kept of it, or `"consumed"` when that does not give them back. Never other bytes: a fingerprint of them would
 * make two bodies one (a replay where 422 was due), and the handler would be handed them.
 *
 * - A Node request (@effect/platform-node 0.108) keeps its text, never its bytes: its `text` decodes the stream
 *   once (Node's decoder, which keeps a byte order mark) and caches the text on the request (`textEffect`); its
 *   `arrayBuffer` and `stream` read the stream again, which is spent. The text gives the bytes back when it was
 *   valid UTF-8 (`bodyOfText`). A request with no text cached had its stream read some other way (`arrayBuffer`,
 *   `stream`, multipart), or is a copy made with `request.modify` since (a router's prefix), which starts without
 *   the cache: nothing is left (unless it declares no body at all, {@link declaresNoBody}), and a read of the
 *   spent stream would wait for its end for ever.
 * - A web request caches `arrayBuffer` and `text` apart: the bytes, if they were read as bytes; else the text, if
 *   it gives them back (`text()` drops a byte order mark: the declared length tells whether there was one).
 */
const readAgain = (
  request: HttpServerRequest.HttpServerRequest,
  node: boolean,
  max: number
): Effect.Effect<BodyRead> => {
  if (node) {
    if ((request as { readonly textEffect?: unknown }).textEffect === undefined) {
      return Effect.succeed(declaresNoBody(request) ? new Uint8Array(0) : "consumed")
    }
    return Effect.orElseSucceed(fromText(request, false, max), () => "unreadable" as const)
  }
  return Effect.matchEffect(request.arrayBuffer, {
    onSuccess: (buffer) => Effect.succeed(buffer.byteLength > max ? "too-large" : new Uint8Array(buffer)),
    onFailure: () => Effect.orElseSucceed(fromText(request, true, max), () => "consumed" as const)
  })
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

/** The bytes of the platform's (cached) text of the body, if it gives them back (`bodyOfText`). */
const fromText = (request: HttpServerRequest.HttpServerRequest, bomDropped: boolean, max: number) =>
  request.text.pipe(
    Effect.map((text): BodyRead => {
      const bytes = bodyOfText(text, bomDropped, request.headers["content-length"])
      return bytes === undefined ? "consumed" : bytes.byteLength > max ? "too-large" : bytes
    }),
    HttpIncomingMessage.withMaxBodySize(Option.some(max))
  )

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
  Effect.async<BodyRead>((resume) => {
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

/** A web request's body (`HttpApp.toWebHandler`, tests), read from its stream with the same bound. */
const readWeb = (request: Request, max: number) => {
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
interface Body {
  readonly bytes: Uint8Array
  readonly request: HttpServerRequest.HttpServerRequest
  text: string | undefined
}
interface Buffered {
  readonly [buffered]: Body
}

const decodedOf = (self: Buffered): string => self[buffered].text ??= new TextDecoder().decode(self[buffered].bytes)
const decodeError = (self: Buffered) => (cause: unknown) =>
  new HttpServerError.RequestError({ request: self[buffered].request, reason: "Decode", cause })

/**
 * The readers of a request made by {@link withBody}, defined once (getters of `this`), so a request costs an
 * object and three fields instead of a set of closures.
 */
const readers: PropertyDescriptorMap = {
  arrayBuffer: {
    get(this: Buffered) {
      const bytes = this[buffered].bytes
      return Effect.succeed(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))
    }
  },
  text: {
    get(this: Buffered) {
      return Effect.sync(() => decodedOf(this))
    }
  },
  json: {
    get(this: Buffered) {
      return Effect.try({
        try: () => {
          const text = decodedOf(this)
          return text === "" ? null : JSON.parse(text) as unknown
        },
        catch: decodeError(this)
      })
    }
  },
  urlParamsBody: {
    get(this: Buffered) {
      return Effect.try({
        try: () => [...new URLSearchParams(decodedOf(this)).entries()] as Array<[string, string]>,
        catch: decodeError(this)
      })
    }
  },
  stream: {
    get(this: Buffered) {
      return Stream.succeed(this[buffered].bytes)
    }
  },
  // multipart bodies too, parsed from the bytes already read (the connection's stream is spent)
  multipartStream: {
    get(this: Buffered) {
      return multipartOf(this[buffered].request, this[buffered].bytes)
    }
  },
  multipart: {
    get(this: Buffered) {
      return Multipart.toPersisted(multipartOf(this[buffered].request, this[buffered].bytes))
    }
  },
  // routers with prefixes rewrite the url through `modify`: the copy must keep the body read here
  modify: {
    value(this: Buffered, options: Parameters<HttpServerRequest.HttpServerRequest["modify"]>[0]) {
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
  self[buffered] = { bytes, request, text: undefined } satisfies Body
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
