import { clientAddress, rememberedDigests } from "@effect-resilience/core/clientAddress"
import type { HttpServerRequest } from "@effect/platform"
import { Data, Effect, Option, Redacted } from "effect"
import { createHash, createHmac } from "node:crypto"
import { isIP } from "node:net"
import type { AddressOptions, ClientScope } from "../../ClientScope.js"
import type * as Api from "../../ClientScope.js"
import type { Fields } from "../errorFields.js"
import * as validate from "../validate.js"
import { problem } from "./problem.js"

/** Defined here, re-exported by the public module: internal files never import values from public ones. */
export class NoClientIdentity extends Data.TaggedError("NoClientIdentity")<Fields<Api.NoClientIdentity>> {
  override get message(): string {
    return `no client identity: ${this.reason}`
  }
}

export const address = (options: AddressOptions = {}): ClientScope => {
  const hops = options.trustedProxies ?? 0
  if (!(Number.isInteger(hops) && hops >= 0)) {
    validate.invalid(`ClientScope.address trustedProxies must be an integer >= 0, got ${hops}`)
  }
  const header = options.forwardedHeader ?? "x-forwarded-for"
  if (header !== "x-forwarded-for" && header !== "forwarded") {
    validate.invalid(`ClientScope.address forwardedHeader must be "x-forwarded-for" or "forwarded", got ${header}`)
  }
  return (request: HttpServerRequest.HttpServerRequest) =>
    Effect.suspend(() => {
      const found = clientAddress(
        Option.getOrUndefined(request.remoteAddress),
        request.headers[header],
        hops,
        header,
        isIP
      )
      return found._tag === "Address"
        ? Effect.succeed(found.address)
        : Effect.fail(new NoClientIdentity({ reason: found.reason }))
    })
}

/**
 * A fixed-size digest of a client scope (64 hex characters), what the stores and limiters keep instead of the
 * scope itself: HMAC-SHA-256 with `secret` when given, else SHA-256, both over a prefix that keeps these
 * digests apart from any other use of the same secret.
 */
export const digester = (secret: Redacted.Redacted<string> | string | undefined) => {
  if (secret !== undefined) {
    const key = typeof secret === "string" ? secret : Redacted.value(secret)
    if (typeof key !== "string" || key.length === 0) validate.invalid("scopeSecret must be a non-empty string")
    return (scope: string): string =>
      createHmac("sha256", key).update("effect-resilience/scope\u0000").update(scope).digest("hex")
  }
  return (scope: string): string =>
    createHash("sha256").update("effect-resilience/scope\u0000").update(scope).digest("hex")
}

/**
 * The digest of the request's scope, or `NoClientIdentity`. An empty scope is no identity: two clients
 * without one would share a scope.
 */
export const resolver = <R>(
  scope: ClientScope<R> | undefined,
  secret: Redacted.Redacted<string> | string | undefined
) => {
  const scopeOf: ClientScope<R> = scope ?? (address() as ClientScope<R>)
  if (typeof scopeOf !== "function") validate.invalid("scope must be a function of the request")
  // the default scope is the client's address, which is not a secret: its digests are remembered (a few clients send
  // most requests); a scope function's values may be credentials, and are never kept
  const digest = scope === undefined ? rememberedDigests(digester(secret)) : digester(secret)
  return (request: HttpServerRequest.HttpServerRequest): Effect.Effect<string, NoClientIdentity, R> =>
    Effect.flatMap(scopeOf(request), (s) =>
      typeof s === "string" && s !== ""
        ? Effect.succeed(digest(s))
        : Effect.fail(new NoClientIdentity({ reason: "the scope function gave an empty scope" })))
}

/**
 * The answer to a request without a client identity, logged: a 500, since it is the server's set-up that
 * cannot tell clients apart (no address, no principal), and sharing one scope between them is not an option.
 */
export const refuse = (middleware: string, error: NoClientIdentity) =>
  Effect.as(
    Effect.logError(`${middleware}: request refused, ${error.message}`),
    problem({
      status: 500,
      type: "client-identity-unavailable",
      title: "The server cannot tell who sent this request",
      detail: "the request was not processed"
    })
  )
