import type { HttpApp } from "@effect/platform"
import {
  Headers,
  HttpBody,
  HttpIncomingMessage,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Chunk, Duration, Effect, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import type { Readable } from "node:stream"
import type { Options } from "../http/IdempotencyMiddleware.js"
import { parseIdempotencyKey } from "../http/StructuredFields.js"
import { type ClaimRef, IdempotencyStore, type StoredResponse } from "../IdempotencyStore.js"
import { defaultScope } from "./clientScope.js"
import { problem } from "./problem.js"
import * as validate from "./validate.js"

const replayedHeaders = ["content-type", "location"] as const

export const make = (options: Options = {}) => {
  const methods = new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
  const header = (options.header ?? "Idempotency-Key").toLowerCase()
  const required = options.required ?? true
  const maxKeyLength = validate.positiveInt("IdempotencyMiddleware maxKeyLength", options.maxKeyLength ?? 255)
  const maxBodyBytes = validate.positiveInt("IdempotencyMiddleware maxBodyBytes", options.maxBodyBytes ?? 1024 * 1024)
  const ttl = Duration.millis(validate.millis("IdempotencyMiddleware ttl", options.ttl ?? "24 hours"))
  const leaseMillis = validate.millis("IdempotencyMiddleware lease", options.lease ?? "60 seconds")
  if (leaseMillis <= 0) validate.invalid("IdempotencyMiddleware lease must be > 0")
  const lease = Duration.millis(leaseMillis)
  // a claim is kept for at most its TTL: shorter than the lease, a live owner could lose it
  if (Duration.toMillis(ttl) <= leaseMillis) validate.invalid("IdempotencyMiddleware ttl must be longer than the lease")
  const storeServerErrors = options.storeServerErrors ?? true
  const scopeOf = options.scope ?? defaultScope

  return <E, R>(
    app: HttpApp.Default<E, R>
  ): HttpApp.Default<E, R | IdempotencyStore | HttpServerRequest.HttpServerRequest> =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (!methods.has(request.method)) return yield* app
      const raw = request.headers[header]
      if (raw === undefined || raw.trim() === "") {
        if (!required) return yield* app
        return problem({
          status: 400,
          type: "idempotency-key-missing",
          title: "Idempotency-Key header required",
          detail: `${request.method} requests to this endpoint need an ${options.header ?? "Idempotency-Key"} header`
        })
      }
      const key = parseIdempotencyKey(raw, { maxLength: maxKeyLength })
      if (Option.isNone(key)) {
        return problem({
          status: 400,
          type: "idempotency-key-invalid",
          title: "Invalid Idempotency-Key",
          detail: `the key must be 1 to ${maxKeyLength} printable ASCII characters (a token or a quoted string)`
        })
      }
      const declared = Number(request.headers["content-length"] ?? "0")
      if (declared > maxBodyBytes) return tooLarge(maxBodyBytes)
      const body = yield* readBody(request, maxBodyBytes)
      if (body === "too-large") return tooLarge(maxBodyBytes)
      if (body === "unreadable") {
        return problem({ status: 400, type: "body-unreadable", title: "The request body could not be read" })
      }

      const store = yield* IdempotencyStore
      const scope = scopeOf(request)
      const fingerprint = createHash("sha256").update(`${request.method} ${request.url}\n`).update(body).digest("hex")
      const ask = Effect.either(store.claim({ scope, key: key.value, fingerprint, ttl, lease }))

      // One uninterruptible region from the claim to its completion or release: a client that goes away
      // right after the claim succeeded must not leave the key "in progress" until the lease runs out.
      return yield* Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(ask, (claimed): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> => {
          if (claimed._tag === "Left") return Effect.succeed(storeUnavailable)
          const claim = claimed.right
          switch (claim._tag) {
            case "Mismatch":
              return Effect.succeed(problem({
                status: 422,
                type: "idempotency-key-reused",
                title: "Idempotency-Key reused with a different request",
                detail: "this key was first used with another method, path or body"
              }))
            case "InProgress":
              return Effect.succeed(problem({
                status: 409,
                type: "idempotency-key-in-progress",
                title: "A request with this Idempotency-Key is still in progress",
                detail: "retry after the first request has finished",
                headers: { "retry-after": "1" }
              }))
            case "Completed":
              return Effect.succeed(replay(claim.response))
          }
          const ref: ClaimRef = { scope, key: key.value, token: claim.token }
          const release = Effect.catchAll(
            store.release(ref),
            (e) => Effect.logWarning("idempotency: release failed", e)
          )
          const heartbeat = store.renew(ref, lease).pipe(
            Effect.delay(Duration.millis(leaseMillis / 3)),
            Effect.catchAll((e) => Effect.as(Effect.logWarning("idempotency: lease renewal failed", e), true)),
            Effect.repeat({ while: (stillOwned) => stillOwned })
          )
          const handler = Effect.scoped(Effect.zipRight(
            Effect.forkScoped(Effect.interruptible(heartbeat)), // the server may run handlers uninterruptibly
            Effect.provideService(app, HttpServerRequest.HttpServerRequest, withBody(request, body))
          ))
          return Effect.matchCauseEffect(restore(handler), {
            // a defect, a typed failure or an interruption: nothing is stored, a retry runs again
            onFailure: (cause) => Effect.zipRight(release, Effect.failCause(cause)),
            onSuccess: (response) =>
              Effect.flatMap(Effect.tapErrorCause(captureBody(response), () => release), (bytes) => {
                if (Option.isNone(bytes) || (response.status >= 500 && !storeServerErrors)) {
                  return Effect.as(release, Option.isNone(bytes) ? response : withBytes(response, bytes.value))
                }
                const stored: StoredResponse = {
                  status: response.status,
                  headers: pickHeaders(response),
                  body: bytes.value
                }
                return store.complete(ref, stored, ttl).pipe(
                  Effect.flatMap((owned) =>
                    owned ? Effect.void : Effect.logWarning("idempotency: claim was taken over before completion")
                  ),
                  Effect.catchAll((e) => Effect.logWarning("idempotency: storing the response failed", e)),
                  Effect.as(withBytes(response, bytes.value))
                )
              })
          })
        })
      )
    })
}

const tooLarge = (max: number) =>
  problem({
    status: 413,
    type: "body-too-large",
    title: "Request body too large",
    detail: `idempotent requests may carry at most ${max} bytes`,
    headers: { connection: "close" }
  })

const storeUnavailable = problem({
  status: 503,
  type: "idempotency-store-unavailable",
  title: "Idempotency store unavailable",
  detail: "the request was not processed; retry it with the same Idempotency-Key",
  headers: { "retry-after": "1" }
})

/**
 * Reads the body, at most `max` bytes. On Node the request stream is read directly while nothing has read
 * it yet: past `max` the rest is discarded as it arrives (not kept), so the client still gets its 413 instead
 * of a reset connection. Otherwise the platform's (cached) text reader is used, which stops at `max`.
 */
const readBody = (
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

/** The request with its body already read, so the handler can read it again. */
const withBody = (
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
    // routers with prefixes rewrite the url through `modify`: the copy must keep the body read here
    modify: {
      value: (options: Parameters<HttpServerRequest.HttpServerRequest["modify"]>[0]) =>
        withBody(request.modify(options), bytes)
    }
  })
}

/** The response body as bytes; `none` for bodies that cannot be stored (form data, unknown raw bodies). */
const captureBody = (
  response: HttpServerResponse.HttpServerResponse
): Effect.Effect<Option.Option<Uint8Array>> => {
  const body = response.body
  switch (body._tag) {
    case "Empty":
      return Effect.succeed(Option.some(new Uint8Array(0)))
    case "Uint8Array":
      return Effect.succeed(Option.some(body.body))
    case "Raw":
      if (typeof body.body === "string") return Effect.succeed(Option.some(new TextEncoder().encode(body.body)))
      if (body.body instanceof Uint8Array) return Effect.succeed(Option.some(body.body))
      return Effect.succeed(Option.none())
    case "Stream":
      // a body stream that fails is a handler failure: the claim is released and the failure propagates
      return Effect.orDie(
        Effect.map(Stream.runCollect(body.stream), (chunks) => Option.some(concat(Chunk.toReadonlyArray(chunks))))
      )
    case "FormData":
      return Effect.succeed(Option.none())
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

const pickHeaders = (response: HttpServerResponse.HttpServerResponse): Record<string, string> => {
  const out: Record<string, string> = {}
  const contentType = contentTypeOf(response)
  if (contentType !== undefined) out["content-type"] = contentType
  for (const name of replayedHeaders) {
    const value = response.headers[name]
    if (value !== undefined && name !== "content-type") out[name] = value
  }
  return out
}

const withBytes = (response: HttpServerResponse.HttpServerResponse, bytes: Uint8Array) =>
  response.body._tag === "Uint8Array"
    ? response
    : HttpServerResponse.setBody(response, HttpBody.uint8Array(bytes, contentTypeOf(response)))

const replay = (stored: StoredResponse) => {
  const { "content-type": contentType, ...rest } = stored.headers
  return HttpServerResponse.uint8Array(stored.body, {
    status: stored.status,
    headers: Headers.fromInput({ ...rest, "idempotent-replayed": "true" }),
    ...(contentType === undefined ? {} : { contentType })
  })
}
