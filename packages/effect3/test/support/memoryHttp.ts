/**
 * HTTP without sockets, for unit tests of clients: an `HttpClient` whose requests are answered in memory, by a
 * script or by a real `HttpApp` (the middlewares, the example orders service), under the test's `Clock`.
 */
import {
  HttpClient,
  HttpClientError,
  HttpClientResponse,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import type { HttpApp, HttpClientRequest } from "@effect/platform"
import { Effect, Fiber, Queue } from "effect"

/** The body of a client request as bytes (the tests send JSON and text bodies). */
const bodyOf = (request: HttpClientRequest.HttpClientRequest): Uint8Array | undefined =>
  request.body._tag === "Uint8Array" ? request.body.body : undefined

/**
 * A client that serves each request with `app`, as a server would: the handler runs in a fiber of its own
 * (forked in the scope of the test), so a client that stops waiting — a timeout, a hedge that lost — does not
 * stop the handler, which goes on and commits what it commits.
 */
export const appClient = <E, R>(app: HttpApp.Default<E, R>) =>
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
          Effect.catchAllCause(() => Effect.succeed(HttpServerResponse.empty({ status: 500 }))),
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

/**
 * A client whose answers follow `script` (the last step repeats, or `script` is a function of the request's
 * number); every request is recorded in `seen`, a queue a test can wait on.
 */
export const scriptedClient = (script: ReadonlyArray<Step> | ((n: number, request: Seen) => Step)) =>
  Effect.gen(function*() {
    const seen = yield* Queue.unbounded<Seen>()
    let n = 0
    const client = HttpClient.make((request, url) =>
      Effect.gen(function*() {
        const at = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        const record: Seen = { method: request.method, url: url.toString(), headers: request.headers, at }
        yield* Queue.offer(seen, record)
        const i = n++
        const step = typeof script === "function" ? script(i, record) : script[Math.min(i, script.length - 1)]!
        if (step === "hang") return yield* Effect.never
        if (step === "refused" || step === "reset") {
          const code = step === "refused" ? "ECONNREFUSED" : "ECONNRESET"
          return yield* Effect.fail(
            new HttpClientError.RequestError({
              request,
              reason: "Transport",
              cause: Object.assign(new Error(code), { code })
            })
          )
        }
        const { body, headers, status } = typeof step === "number"
          ? { status: step, headers: {}, body: undefined }
          : step
        const text = body ?? (status === 204 || status === 304 ? null : `status ${status}`)
        return HttpClientResponse.fromWeb(request, new Response(text, { status, headers: headers ?? {} }))
      })
    )
    return { client, seen }
  })
