/**
 * One Idempotency-Key per logical request. An `HttpClientRequest` is an immutable value and `execute(request)` an
 * effect that may run many times — retried by this client, by `Effect.retry` around it, hedged by `Hedge.hedge`
 * — so the key belongs to the request value: the first execution of a value draws one and remembers it (a
 * `WeakMap`, as `effect/http` keeps a request's abort controller), every later execution of the same value
 * sends the same one, and a new value gets a new key. A key the caller set wins.
 *
 * It runs before everything else the client does to a request (`mapRequestInput`), so it sees the value the
 * caller passed — whatever the inner client does to the request afterwards (a base URL, say) and however many
 * times.
 */
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import { Effect } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { randomUUID } from "node:crypto"
import * as validate from "../../validate.js"
import { headerName } from "./headers.js"

export interface IdempotencyKeysOptions {
  readonly methods?: ReadonlyArray<string>
  readonly header?: string
}

export const defaultKeyHeader = HttpHeaders.idempotencyKey

export const resolveKeys = (options: IdempotencyKeysOptions | undefined) => {
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    validate.invalid("ResilientHttpClient idempotencyKeys must be an object or false")
  }
  const methods = options?.methods ?? ["POST", "PATCH"]
  if (!Array.isArray(methods) || !methods.every((m) => typeof m === "string")) {
    validate.invalid("ResilientHttpClient idempotencyKeys.methods must be an array of method names")
  }
  return {
    methods: new Set(methods.map((m) => m.toUpperCase())),
    header: headerName("idempotencyKeys.header", options?.header ?? defaultKeyHeader)
  }
}

export const idempotencyKeys = (options?: IdempotencyKeysOptions) => {
  const { header, methods } = resolveKeys(options)
  return <E, R>(self: HttpClient.HttpClient.With<E, R>): HttpClient.HttpClient.With<E, R> => {
    // the keys of this client's requests, made with the client
    const keys = new WeakMap<HttpClientRequest.HttpClientRequest, string>()
    const stamp = (request: HttpClientRequest.HttpClientRequest): HttpClientRequest.HttpClientRequest => {
      if (request.headers[header] !== undefined || !methods.has(request.method)) return request
      let key = keys.get(request)
      if (key === undefined) {
        key = randomUUID()
        keys.set(request, key)
      }
      return HttpClientRequest.setHeader(request, header, key)
    }
    return HttpClient.mapRequestInputEffect(self, (request) => Effect.sync(() => stamp(request)))
  }
}
