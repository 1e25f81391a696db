import type { HttpApp } from "@effect/platform"
import {
  Headers,
  HttpBody,
  HttpIncomingMessage,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { Cause, Chunk, Duration, Effect, Exit, Fiber, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import type { Readable } from "node:stream"
import type { Options } from "../http/IdempotencyMiddleware.js"
import { parseIdempotencyKey } from "../http/StructuredFields.js"
import {
  type ClaimRef,
  IdempotencyStore,
  type IdempotencyStoreError,
  type Store,
  type StoredResponse
} from "../IdempotencyStore.js"
import { refuse, resolver } from "./clientScope.js"
import { IdempotencyStoreFull } from "./idempotencyStore.js"
import { problem } from "./problem.js"
import * as validate from "./validate.js"

/**
 * The response headers a replay repeats, beside the status and the body: what describes the stored
 * representation and what asks the client to do something. Never `Set-Cookie` (a session must not be
 * handed to whoever replays the key).
 */
export const defaultReplayHeaders: ReadonlyArray<string> = [
  "cache-control",
  "content-disposition",
  "content-language",
  "content-location",
  "content-type",
  "etag",
  "expires",
  "last-modified",
  "link",
  "location",
  "ratelimit",
  "ratelimit-policy",
  "retry-after",
  "vary"
]

const neverReplayed = new Set(["set-cookie", "set-cookie2"])

/** Says, on the first answer and on replays, that the stored response kept its status and headers only. */
export const bodyOmittedHeader = "idempotent-replay-body"

export const make = <RS>(options: Options<RS> = {}) => {
  const methods = new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
  const headerName = options.header ?? "Idempotency-Key"
  const header = headerName.toLowerCase()
  const required = options.required ?? true
  const maxKeyLength = validate.positiveInt("IdempotencyMiddleware maxKeyLength", options.maxKeyLength ?? 255)
  const maxBodyBytes = validate.positiveInt("IdempotencyMiddleware maxBodyBytes", options.maxBodyBytes ?? 1024 * 1024)
  const maxResponseBytes = validate.nonNegative(
    "IdempotencyMiddleware maxResponseBytes",
    options.maxResponseBytes ?? 64 * 1024
  )
  const ttl = Duration.millis(validate.millis("IdempotencyMiddleware ttl", options.ttl ?? "24 hours"))
  const leaseMillis = validate.millis("IdempotencyMiddleware lease", options.lease ?? "60 seconds")
  if (leaseMillis <= 0) validate.invalid("IdempotencyMiddleware lease must be > 0")
  const lease = Duration.millis(leaseMillis)
  // a claim is kept for at most its TTL: shorter than the lease, a live owner could lose it
  if (Duration.toMillis(ttl) <= leaseMillis) validate.invalid("IdempotencyMiddleware ttl must be longer than the lease")
  const storeServerErrors = options.storeServerErrors ?? true
  const storeStatus = options.storeStatus ?? (() => true)
  if (typeof storeStatus !== "function") validate.invalid("IdempotencyMiddleware storeStatus must be a function")
  const replayHeaders = new Set(defaultReplayHeaders)
  for (const name of options.replayHeaders ?? []) {
    const lower = name.toLowerCase()
    if (neverReplayed.has(lower)) validate.invalid(`IdempotencyMiddleware never replays ${name}`)
    replayHeaders.add(lower)
  }
  const scopeOf = resolver(options.scope, options.scopeSecret)

  /**
   * Whether a handler's answer is kept as the key's answer. A 429 or 503 asks the client to come back: it is
   * never kept. Other 5xx follow `storeServerErrors`, then `storeStatus` decides.
   */
  const keeps = (status: number): boolean =>
    status !== 429 && status !== 503 && (status < 500 || storeServerErrors) && storeStatus(status)

  const withStore = (store: Store) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | RS> =>
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
          detail: `${request.method} requests to this endpoint need an ${headerName} header`
        })
      }
      const parsed = parseIdempotencyKey(raw, { maxLength: maxKeyLength })
      if (Option.isNone(parsed)) {
        return problem({
          status: 400,
          type: "idempotency-key-invalid",
          title: "Invalid Idempotency-Key",
          detail: `the key must be 1 to ${maxKeyLength} printable ASCII characters (a token or a quoted string)`
        })
      }
      const key = parsed.value
      const declared = Number(request.headers["content-length"] ?? "0")
      if (declared > maxBodyBytes) return tooLarge(maxBodyBytes)
      const body = yield* readBody(request, maxBodyBytes)
      if (body === "too-large") return tooLarge(maxBodyBytes)
      if (body === "unreadable") {
        return problem({ status: 400, type: "body-unreadable", title: "The request body could not be read" })
      }

      const scope = yield* Effect.either(scopeOf(request))
      if (scope._tag === "Left") return yield* refuse("idempotency", scope.left)
      // the full original target: under HttpRouter.mount the url has lost its prefix, and two mounted
      // endpoints must not answer each other's keys
      const fingerprint = createHash("sha256").update(`${request.method} ${request.originalUrl}\n`).update(body)
        .digest("hex")
      const redact = redactor(key, scope.right)
      const claimed = yield* Effect.either(store.claim({ scope: scope.right, key, fingerprint, ttl, lease }))
      if (claimed._tag === "Left") {
        if (claimed.left instanceof IdempotencyStoreFull) {
          yield* Effect.logWarning(`idempotency: ${claimed.left.message}; a new key was refused`)
          return storeFull
        }
        yield* logStoreFailure("claim", claimed.left, redact)
        return storeUnavailable
      }
      const claim = claimed.right
      switch (claim._tag) {
        case "Mismatch":
          return problem({
            status: 422,
            type: "idempotency-key-reused",
            title: "Idempotency-Key reused with a different request",
            detail: "this key was first used with another method, target or body"
          })
        case "InProgress":
          return problem({
            status: 409,
            type: "idempotency-key-in-progress",
            title: "A request with this Idempotency-Key is still in progress",
            detail: "retry after the first request has finished",
            headers: { "retry-after": "1" }
          })
        case "Completed":
          return replay(claim.response)
      }

      const ref: ClaimRef = { scope: scope.right, key, token: claim.token }
      const release = Effect.catchAll(store.release(ref), (e) => logStoreFailure("release", e, redact))
      const heartbeat = store.renew(ref, lease).pipe(
        Effect.delay(Duration.millis(leaseMillis / 3)),
        Effect.catchAll((e) => Effect.as(logStoreFailure("renew", e, redact), true)),
        Effect.repeat({ while: (stillOwned) => stillOwned })
      )
      const complete = (stored: StoredResponse) =>
        store.complete(ref, stored, ttl).pipe(
          Effect.flatMap((owned) =>
            owned ? Effect.void : Effect.logWarning("idempotency: claim was taken over before completion")
          ),
          Effect.catchAll((e) => logStoreFailure("complete", e, redact))
        )
      const handler = Effect.scoped(Effect.zipRight(
        Effect.forkScoped(Effect.interruptible(heartbeat)), // the server may run handlers uninterruptibly
        Effect.provideService(app, HttpServerRequest.HttpServerRequest, withBody(request, body))
      ))

      /**
       * The admitted handler and everything after it, as one piece that no client can stop: once a handler
       * has started it may have had effects, so it runs to its end and its answer is stored for the retry.
       */
      const settle = Effect.flatMap(
        Effect.exit(handler),
        (exit): Effect.Effect<HttpServerResponse.HttpServerResponse, E> => {
          if (Exit.isSuccess(exit)) return answer(exit.value)
          const cause = exit.cause
          // a defect is answered 500 by the server: stored like a 500 response (it may have committed)
          if (Cause.isDie(cause)) {
            const store500 = keeps(500) ? complete({ status: 500, headers: {}, body: new Uint8Array(0) }) : release
            return Effect.zipRight(store500, Effect.failCause(cause))
          }
          // a typed failure reports that the handler did nothing: the key is free for a retry
          if (Cause.isFailure(cause)) return Effect.zipRight(release, Effect.failCause(cause))
          // interrupted from inside: it may have committed, so the claim is left to run out its lease
          return Effect.failCause(cause)
        }
      )

      const answer = (response: HttpServerResponse.HttpServerResponse) =>
        Effect.flatMap(captureBody(response, maxResponseBytes), (captured) => {
          const sent = captured.bytes === undefined ? response : withBytes(response, captured.bytes)
          if (!keeps(response.status)) return Effect.as(release, sent)
          const headers = pickHeaders(response, replayHeaders)
          if (!captured.storable) {
            // answered in full, but only its status and headers can be replayed: say so, now and on replays
            headers[bodyOmittedHeader] = "omitted"
            return Effect.as(
              complete({ status: response.status, headers, body: new Uint8Array(0) }),
              HttpServerResponse.setHeader(sent, bodyOmittedHeader, "omitted")
            )
          }
          return Effect.as(complete({ status: response.status, headers, body: captured.bytes! }), sent)
        })

      // The handler runs in a fiber of its own that inherits the request's context (and its deadline). The
      // request only waits for it: a client that goes away, or a deadline that passes, ends the wait, never
      // the handler.
      const fiber = yield* Effect.forkDaemon(settle)
      return yield* Effect.interruptible(Fiber.join(fiber))
    })

  return Effect.map(IdempotencyStore, withStore)
}

/** Replaces the key and the scope digest in a store failure's text: logs must not carry key material. */
const redactor = (key: string, scope: string) => (text: string): string =>
  text.split(key).join("<key>").split(scope).join("<scope>")

/** One log line per store failure, with its cause and without the key or the scope. */
const logStoreFailure = (
  operation: IdempotencyStoreError["operation"],
  error: unknown,
  redact: (text: string) => string
) => Effect.logWarning(`idempotency: the store failed (${operation}): ${redact(describe(error))}`)

/** An error and the chain of its causes, as text. */
const describe = (error: unknown): string => {
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

const storeFull = problem({
  status: 503,
  type: "idempotency-store-full",
  title: "Idempotency store full",
  detail: "the request was not processed: no new key can be remembered now; retry it with the same Idempotency-Key",
  headers: { "retry-after": "60" }
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

interface Captured {
  /** The whole body when it is known as bytes (to answer with); `undefined` to answer with the response as is. */
  readonly bytes: Uint8Array | undefined
  /** Whether the body can be stored: known as bytes, and at most `maxResponseBytes`. */
  readonly storable: boolean
}

/** The response body as bytes, and whether it may be stored (form data and unknown raw bodies cannot). */
const captureBody = (
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

const pickHeaders = (
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
