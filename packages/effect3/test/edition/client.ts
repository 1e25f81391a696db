/**
 * HTTP for the client suites (ResilientHttpClient*.test.ts): `@effect/platform`'s modules, and the few values its
 * client spells differently from Effect 4's (`RequestError` and `ResponseError`, where Effect 4 has one
 * `HttpClientError` with a `reason`).
 */
import {
  HttpClient,
  HttpClientError,
  HttpClientRequest,
  HttpClientResponse,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpClient, NodeHttpServer, Undici } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"

/** Effect's HTTP modules (Effect 3: from "@effect/platform"; Effect 4: from "effect/http"). */
export {
  FetchHttpClient,
  HttpClient,
  HttpClientError,
  HttpClientRequest,
  HttpClientResponse,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"

/** The ResilientHttpClient/Node transport's connect timeout in undici's milliseconds (internal in both editions). */
export { connectMillis } from "../../src/internal/http/resilientHttpClient/node.js"

/** Serves an app (an `Effect` of an `HttpServerResponse`) on 127.0.0.1 for the rest of the scope; its port. */
export const serveNode = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.gen(function*() {
    const server = yield* NodeHttpServer.make(createServer, { port: 0, host: "127.0.0.1" })
    yield* server.serve(app)
    return server.address._tag === "TcpAddress" ? server.address.port : yield* Effect.die(new Error("not TCP"))
  })

/** A JSON request body (Effect 4: `HttpClientRequest.bodyJsonUnsafe`). */
export const bodyJson = HttpClientRequest.bodyUnsafeJson

/** A JSON response (Effect 4: `HttpServerResponse.jsonUnsafe`). */
export const jsonResponse = HttpServerResponse.unsafeJson

/** Undici's client with an agent of these options (Effect 4: `NodeHttpClient.layerUndiciOptions`). */
export const undiciLayer = (options: { readonly connections?: number }): Layer.Layer<HttpClient.HttpClient> =>
  Layer.scoped(
    HttpClient.HttpClient,
    Effect.acquireRelease(
      Effect.sync(() => new Undici.Agent(options)),
      (agent) => Effect.promise(() => agent.destroy())
    )
      .pipe(Effect.map(NodeHttpClient.makeUndici))
  )

/** A transport failure with the error code undici gives (Effect 4: an `HttpClientError`'s `TransportError`). */
export const transportFailure = (request: HttpClientRequest.HttpClientRequest, code: string, cause?: unknown) =>
  new HttpClientError.RequestError({
    request,
    reason: "Transport",
    cause: cause ?? Object.assign(new Error(code), { code })
  })

/** A request that could not be encoded (Effect 4: an `HttpClientError`'s `EncodeError`). */
export const encodeFailure = (request: HttpClientRequest.HttpClientRequest) =>
  new HttpClientError.RequestError({ request, reason: "Encode" })

/**
 * Whether `u` is the client's error for a body that could not be read (Effect 3: a `ResponseError` with reason
 * "Decode"; Effect 4: an `HttpClientError` whose reason is a `DecodeError`); its `cause` says why.
 */
export const isDecodeError = (u: unknown): u is { readonly cause: unknown } =>
  HttpClientError.isHttpClientError(u) && u._tag === "ResponseError" && u.reason === "Decode"

/**
 * A response answered in memory (no body for 204 and 304, else `status <n>` unless given): Effect 3 reads a web
 * `Response`'s body through promises, which its TestClock lets settle (Effect 4's does not: its in-memory
 * response is read synchronously).
 */
export const memoryResponse = (
  request: HttpClientRequest.HttpClientRequest,
  status: number,
  options: { readonly headers?: Readonly<Record<string, string>>; readonly body?: string | null } = {}
): HttpClientResponse.HttpClientResponse =>
  HttpClientResponse.fromWeb(
    request,
    new Response(
      options.body !== undefined ? options.body : status === 204 || status === 304 ? null : `status ${status}`,
      { status, headers: options.headers ?? {} }
    )
  )

/** Provides `client` as the `HttpClient` service (Effect 3: `@effect/platform`'s tag; Effect 4: `effect/http`'s). */
export const provideHttpClient =
  (client: HttpClient.HttpClient) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, HttpClient.HttpClient>> =>
    Effect.provideService(self, HttpClient.HttpClient, client)
