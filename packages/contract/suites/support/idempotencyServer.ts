/**
 * An HTTP server without sockets, for the idempotency suites: each request becomes a web `Request` (with the
 * client's address set as a server sets it), the app runs in a fiber of its own as a server runs it, under the
 * test's `Clock`, and its failures become the responses a server gives them. A client that stops waiting (its fiber
 * interrupted) interrupts the handler, as a closed connection does. Written once against the adapter (not a suite:
 * its name does not end in `.test.ts`), so compiled and run against each edition.
 */
import {
  catchAllCause,
  causeResponse,
  forkIn,
  HttpServerRequest,
  HttpServerResponse,
  serverRequestFrom
} from "#edition"
import { Effect, Fiber } from "effect"
import type { Scope } from "effect"

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly bytes: Uint8Array
}

export interface Send {
  readonly method?: string
  readonly path?: string
  readonly headers?: Readonly<Record<string, string>>
  /** A JSON body (an object), text, bytes or a stream (sent without a length). */
  readonly body?: unknown
  /** The `Idempotency-Key` header. */
  readonly key?: string
  /** The client's address (default 127.0.0.1); `null` for none. */
  readonly from?: string | null
}

const bodyOf = (body: unknown): RequestInit["body"] | undefined =>
  body === undefined
    ? undefined
    : typeof body === "string" || body instanceof Uint8Array || body instanceof ReadableStream
    ? body as RequestInit["body"]
    : JSON.stringify(body)

/** The request a server would hand the app. */
export const requestOf = (init: Send = {}): HttpServerRequest.HttpServerRequest => {
  const method = init.method ?? (init.body === undefined && init.key === undefined ? "GET" : "POST")
  const body = method === "GET" ? undefined : bodyOf(init.body ?? {})
  // the length a client declares for a body it knows whole (a stream is sent without one), as a server sees it
  const length = typeof body === "string"
    ? new TextEncoder().encode(body).byteLength
    : body instanceof Uint8Array
    ? body.byteLength
    : undefined
  const web = new Request(`http://127.0.0.1${init.path ?? "/"}`, {
    method,
    headers: {
      ...(length === undefined ? {} : { "content-length": String(length) }),
      ...(init.key === undefined ? {} : { "idempotency-key": init.key }),
      ...init.headers
    },
    ...(body === undefined ? {} : { body, duplex: "half" })
  } as RequestInit)
  return serverRequestFrom(web, init.from === undefined ? "127.0.0.1" : init.from)
}

/** What the client receives for `response`. */
export const replyOf = (response: HttpServerResponse.HttpServerResponse): Effect.Effect<Reply> =>
  Effect.promise(async () => {
    const web = HttpServerResponse.toWeb(response)
    const bytes = new Uint8Array(await web.arrayBuffer())
    const headers: Record<string, string> = {}
    web.headers.forEach((value, name) => (headers[name] = value))
    return { status: web.status, headers, body: new TextDecoder().decode(bytes), bytes }
  })

/**
 * Serves `app` for the rest of the scope: the returned function sends one request and reads the whole reply. The
 * handler's fiber belongs to the scope (a request scope of its own is provided, as servers do).
 */
export const serve = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const context = yield* Effect.context<Exclude<R, HttpServerRequest.HttpServerRequest | Scope.Scope>>()
    return (init: Send = {}): Effect.Effect<Reply> =>
      Effect.gen(function*() {
        const handler = app.pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, requestOf(init)),
          Effect.scoped,
          catchAllCause(causeResponse),
          Effect.provide(context)
        ) as Effect.Effect<HttpServerResponse.HttpServerResponse>
        const served = yield* forkIn(handler, scope)
        const response = yield* Effect.onInterrupt(Fiber.join(served), () => Fiber.interrupt(served))
        return yield* replyOf(response)
      })
  })
