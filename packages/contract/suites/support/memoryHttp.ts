/**
 * HTTP without sockets, for the client suites: an `HttpClient` whose requests are answered in memory, by a script
 * or by an app (an `Effect` of an `HttpServerResponse`, as a server runs it), under the test's `Clock`; and the
 * resilient client over a scripted server. Written once against the adapter, like the suites (not a suite itself:
 * its name does not end in `.test.ts`), so compiled and run against each edition.
 */
import {
  catchAllCause,
  HttpClient,
  HttpClientRequest,
  HttpClientResponse,
  HttpServerRequest,
  HttpServerResponse,
  memoryResponse,
  transportFailure
} from "#edition"
import { Clock, Effect, Exit, Fiber, Queue } from "effect"
import { Backoff, ResilientHttpClient } from "effect-resilience"

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
          catchAllCause(() => Effect.succeed(HttpServerResponse.empty({ status: 500 }))),
          Effect.provide(context)
        ) as Effect.Effect<HttpServerResponse.HttpServerResponse>
        const served = yield* Effect.forkIn(handler, scope)
        const response = yield* Fiber.join(served)
        return HttpClientResponse.fromWeb(request, HttpServerResponse.toWeb(response))
      })
    )
  })

/** The backoff of the scripted preset: 100 ms, doubling, at most 1 s. */
export const fast = Backoff.exponential({ base: "100 millis", cap: "1 second" })

/** The preset over a scripted in-memory server (3 attempts at most, on {@link fast}, unless `options` say). */
export const scripted = (script: ReadonlyArray<Step>, options: ResilientHttpClient.Options = {}) =>
  Effect.gen(function*() {
    const { client, log, seen } = yield* scriptedClient(script)
    const http = yield* ResilientHttpClient.make({ retry: { schedule: fast, maxAttempts: 3 }, ...options }).pipe(
      Effect.provideService(HttpClient.HttpClient, client)
    )
    return { http, seen, log, base: client }
  })

/** The exit of a call, with its response's status for a success. */
export const statusOf = (effect: Effect.Effect<{ readonly status: number }, unknown>) =>
  Effect.map(Effect.exit(effect), Exit.map((r) => r.status))
