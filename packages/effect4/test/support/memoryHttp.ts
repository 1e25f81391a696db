/**
 * HTTP without sockets, for unit tests of clients: an `HttpClient` whose requests are answered in memory, by a
 * script or by an app (an `Effect` of an `HttpServerResponse`, as Effect 4's server runs it), under the test's
 * `Clock`.
 */
import { Clock, Effect, Fiber, Inspectable, Option, Queue, Stream } from "effect"
import {
  Cookies,
  Headers,
  HttpClient,
  HttpClientError,
  type HttpClientRequest,
  HttpClientResponse,
  HttpIncomingMessage,
  HttpServerRequest,
  HttpServerResponse,
  UrlParams
} from "effect/http"
import { pipeArguments } from "effect/Pipeable"

/**
 * A response whose body is in memory and read synchronously. A `fetch` `Response`'s body is read through promises,
 * which Effect 4's TestClock does not wait for: a retry that reads (and lets go of) a response before its backoff
 * would start sleeping after `TestClock.adjust` had already moved past its instant.
 */
class MemoryResponse implements HttpClientResponse.HttpClientResponse {
  readonly [HttpClientResponse.TypeId]: typeof HttpClientResponse.TypeId = HttpClientResponse.TypeId
  readonly [HttpIncomingMessage.TypeId]: typeof HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId
  readonly headers: Headers.Headers
  readonly cookies = Cookies.empty
  readonly remoteAddress = Option.none<string>()
  constructor(
    readonly request: HttpClientRequest.HttpClientRequest,
    readonly status: number,
    headers: Readonly<Record<string, string>>,
    readonly body: string | null
  ) {
    this.headers = Headers.fromInput(headers)
  }
  get url() {
    return this.request.url
  }
  private error(description: string): HttpClientError.HttpClientError {
    return new HttpClientError.HttpClientError({
      reason: new HttpClientError.DecodeError({ request: this.request, response: this, description })
    })
  }
  get text() {
    return Effect.succeed(this.body ?? "")
  }
  get json() {
    return Effect.try({ try: () => JSON.parse(this.body ?? "null"), catch: () => this.error("not JSON") })
  }
  get arrayBuffer() {
    return Effect.sync(() => new TextEncoder().encode(this.body ?? "").buffer as ArrayBuffer)
  }
  get urlParamsBody() {
    return Effect.sync(() => UrlParams.fromInput(new URLSearchParams(this.body ?? "")))
  }
  get formData() {
    return Effect.fail(this.error("no form data"))
  }
  get upgrade() {
    return Effect.fail(this.error("no upgrade"))
  }
  get stream() {
    return this.body === null
      ? Stream.fail(this.error("empty body"))
      : Stream.succeed(new TextEncoder().encode(this.body))
  }
  pipe(...args: Array<unknown>) {
    return pipeArguments(this, args as unknown as IArguments)
  }
  toJSON() {
    return { _id: "MemoryResponse", status: this.status }
  }
  toString() {
    return JSON.stringify(this.toJSON())
  }
  [Inspectable.NodeInspectSymbol]() {
    return this.toJSON()
  }
}

/** A response answered in memory, its body read synchronously. */
export const memoryResponse = (
  request: HttpClientRequest.HttpClientRequest,
  status: number,
  options: { readonly headers?: Readonly<Record<string, string>>; readonly body?: string | null } = {}
): HttpClientResponse.HttpClientResponse =>
  new MemoryResponse(
    request,
    status,
    options.headers ?? {},
    options.body !== undefined ? options.body : status === 204 || status === 304 ? null : `status ${status}`
  )

/** The body of a client request as bytes (the tests send JSON and text bodies). */
const bodyOf = (request: HttpClientRequest.HttpClientRequest): Uint8Array<ArrayBuffer> | undefined =>
  request.body._tag === "Uint8Array" ? request.body.body as Uint8Array<ArrayBuffer> : undefined

/**
 * A client that serves each request with `app`, as a server would: the handler runs in a fiber of its own
 * (forked in the scope of the test), so a client that stops waiting — a timeout, a hedge that lost — does not
 * stop the handler, which goes on and commits what it commits.
 */
export const appClient = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const context = yield* Effect.context<Exclude<R, HttpServerRequest.HttpServerRequest>>()
    return HttpClient.make((request, url) =>
      Effect.gen(function*() {
        const body = bodyOf(request)
        const web = new Request(url, {
          method: request.method,
          headers: request.headers,
          ...(body === undefined ? {} : { body })
        })
        const handler = app.pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(web)),
          Effect.catchCause(() => Effect.succeed(HttpServerResponse.empty({ status: 500 }))),
          Effect.provide(context)
        ) as Effect.Effect<HttpServerResponse.HttpServerResponse>
        const served = yield* Effect.forkIn(handler, scope)
        const response = yield* Fiber.join(served)
        return HttpClientResponse.fromWeb(request, HttpServerResponse.toWeb(response))
      })
    )
  })

/** What a scripted server saw of one request. */
export interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly at: number
}

/** One scripted answer: a status (with headers), a transport failure, or never answering. */
export type Step =
  | number
  | { readonly status: number; readonly headers?: Readonly<Record<string, string>>; readonly body?: string }
  | "refused"
  | "reset"
  | "hang"

/** A transport failure with the error code undici gives. */
export const transportFailure = (request: HttpClientRequest.HttpClientRequest, code: string, cause?: unknown) =>
  new HttpClientError.HttpClientError({
    reason: new HttpClientError.TransportError({ request, cause: cause ?? Object.assign(new Error(code), { code }) })
  })

/**
 * A client whose answers follow `script` (the last step repeats, or `script` is a function of the request's
 * number); every request is recorded in `seen`, a queue a test can wait on, and in `log`, every request so far.
 */
export const scriptedClient = (script: ReadonlyArray<Step> | ((n: number, request: Seen) => Step)) =>
  Effect.gen(function*() {
    const seen = yield* Queue.unbounded<Seen>()
    const log: Array<Seen> = []
    let n = 0
    const client = HttpClient.make((request, url) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        const record: Seen = { method: request.method, url: url.toString(), headers: request.headers, at }
        log.push(record)
        yield* Queue.offer(seen, record)
        const i = n++
        const step = typeof script === "function" ? script(i, record) : script[Math.min(i, script.length - 1)]!
        if (step === "hang") return yield* Effect.never
        if (step === "refused" || step === "reset") {
          return yield* Effect.fail(transportFailure(request, step === "refused" ? "ECONNREFUSED" : "ECONNRESET"))
        }
        const { body, headers, status } = typeof step === "number"
          ? { status: step, headers: {}, body: undefined }
          : step
        return memoryResponse(request, status, { headers: headers ?? {}, ...(body === undefined ? {} : { body }) })
      })
    )
    return { client, seen, log }
  })
