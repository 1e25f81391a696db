/**
 * HTTP for the client suites (ResilientHttpClient*.test.ts): Effect 4's modules, and the few values its client
 * spells differently from Effect 3's (one `HttpClientError` with a `reason`, where Effect 3 has `RequestError` and
 * `ResponseError`).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Inspectable, Option, Stream } from "effect"
import type { Layer } from "effect"
import {
  Cookies,
  Headers,
  HttpClientError,
  HttpClientRequest,
  HttpClientResponse,
  HttpIncomingMessage,
  HttpServerResponse,
  UrlParams
} from "effect/http"
import { HttpClient } from "effect/http"
import { pipeArguments } from "effect/Pipeable"

/** Effect's HTTP modules (Effect 3: from "@effect/platform"; Effect 4: from "effect/http"). */
export {
  FetchHttpClient,
  HttpClient,
  HttpClientError,
  HttpClientRequest,
  HttpClientResponse,
  HttpServerRequest,
  HttpServerResponse
} from "effect/http"

/** The ResilientHttpClient/Node transport's connect timeout in undici's milliseconds (internal in both editions). */
export { connectMillis } from "../../src/internal/http/resilientHttpClient/node.js"

/** Serves an app (an `Effect` of an `HttpServerResponse`) on 127.0.0.1 for the rest of the scope; its port. */
export { serveNode } from "../support/nodeServer.js"

/** A JSON request body (Effect 3: `HttpClientRequest.bodyUnsafeJson`). */
export const bodyJson = HttpClientRequest.bodyJsonUnsafe

/** A JSON response (Effect 3: `HttpServerResponse.unsafeJson`). */
export const jsonResponse = HttpServerResponse.jsonUnsafe

/** Undici's client with an agent of these options (Effect 3: `NodeHttpClient.makeUndici(new Undici.Agent(o))`). */
export const undiciLayer = (options: { readonly connections?: number }): Layer.Layer<HttpClient.HttpClient> =>
  NodeHttpClient.layerUndiciOptions(options)

/** A transport failure with the error code undici gives (Effect 3: `RequestError` with reason "Transport"). */
export const transportFailure = (request: HttpClientRequest.HttpClientRequest, code: string, cause?: unknown) =>
  new HttpClientError.HttpClientError({
    reason: new HttpClientError.TransportError({ request, cause: cause ?? Object.assign(new Error(code), { code }) })
  })

/** A request that could not be encoded (Effect 3: `RequestError` with reason "Encode"). */
export const encodeFailure = (request: HttpClientRequest.HttpClientRequest) =>
  new HttpClientError.HttpClientError({ reason: new HttpClientError.EncodeError({ request }) })

/**
 * Whether `u` is the client's error for a body that could not be read (Effect 3: a `ResponseError` with reason
 * "Decode"; Effect 4: an `HttpClientError` whose reason is a `DecodeError`); its `cause` says why.
 */
export const isDecodeError = (u: unknown): u is { readonly cause: unknown } =>
  u instanceof HttpClientError.HttpClientError && u.reason._tag === "DecodeError"

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

/**
 * A response answered in memory (no body for 204 and 304, else `status <n>` unless given), its body read
 * synchronously in Effect 4 (Effect 3: `HttpClientResponse.fromWeb`, whose TestClock lets promises settle).
 */
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

/** Provides `client` as the `HttpClient` service (Effect 3: `@effect/platform`'s tag; Effect 4: `effect/http`'s). */
export const provideHttpClient =
  (client: HttpClient.HttpClient) =>
  <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, HttpClient.HttpClient>> =>
    Effect.provideService(self, HttpClient.HttpClient, client)
