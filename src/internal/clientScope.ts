import type { HttpServerRequest } from "@effect/platform"
import { Data, Effect, Option, Redacted } from "effect"
import { createHash, createHmac } from "node:crypto"
import { isIP } from "node:net"
import type { AddressOptions, ClientScope } from "../http/ClientScope.js"
import { problem } from "./problem.js"
import * as validate from "./validate.js"

/** Defined here, re-exported by the public module: internal files never import values from public ones. */
export class NoClientIdentity extends Data.TaggedError("NoClientIdentity")<{ readonly reason: string }> {
  override get message(): string {
    return `no client identity: ${this.reason}`
  }
}

/** `::ffff:192.0.2.1` (an IPv4 client of a dual-stack socket) is `192.0.2.1`. */
const normalise = (address: string): string => {
  const lower = address.toLowerCase()
  return lower.startsWith("::ffff:") && isIP(lower.slice(7)) === 4 ? lower.slice(7) : lower
}

/** `X-Forwarded-For: client, proxy1, proxy2`: the entries, leftmost first. */
const xForwardedFor = (value: string): Array<string> => value.split(",").map((part) => part.trim())

/**
 * RFC 7239 `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"`: the `for` node of each element,
 * leftmost first, without quotes, brackets and port ("" when an element has none).
 */
const forwarded = (value: string): Array<string> =>
  splitOutsideQuotes(value, ",").map((element) => {
    for (const pair of splitOutsideQuotes(element, ";")) {
      const eq = pair.indexOf("=")
      if (eq === -1 || pair.slice(0, eq).trim().toLowerCase() !== "for") continue
      let node = pair.slice(eq + 1).trim()
      if (node.length >= 2 && node.startsWith("\"") && node.endsWith("\"")) {
        node = node.slice(1, -1).replace(/\\(.)/g, "$1")
      }
      if (node.startsWith("[")) {
        return node.slice(1, node.indexOf("]") === -1 ? node.length : node.indexOf("]"))
      }
      // an IPv4 address with a port (IPv6 is always bracketed in this header)
      const colon = node.indexOf(":")
      return colon !== -1 && node.indexOf(":", colon + 1) === -1 ? node.slice(0, colon) : node
    }
    return ""
  })

/** Splits on `separator` outside double-quoted strings, in one linear pass. */
const splitOutsideQuotes = (value: string, separator: string): Array<string> => {
  const parts: Array<string> = []
  let quoted = false
  let start = 0
  for (let i = 0; i < value.length; i++) {
    const c = value[i]
    if (c === "\\" && quoted) i++
    else if (c === "\"") quoted = !quoted
    else if (c === separator && !quoted) {
      parts.push(value.slice(start, i))
      start = i + 1
    }
  }
  parts.push(value.slice(start))
  return parts
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
      const peer = Option.getOrUndefined(request.remoteAddress)
      if (peer === undefined || peer === "") {
        return Effect.fail(
          new NoClientIdentity({ reason: "the connection has no remote address (a Unix socket?): configure a scope" })
        )
      }
      // the chain from this server outwards: the peer, then what each trusted proxy says it was connected to
      let chain: Array<string> = [peer]
      if (hops > 0) {
        const raw = request.headers[header]
        if (raw !== undefined) chain = chain.concat((header === "forwarded" ? forwarded : xForwardedFor)(raw).reverse())
      }
      const client = chain[Math.min(hops, chain.length - 1)]!
      if (isIP(client) === 0) {
        return Effect.fail(
          new NoClientIdentity({ reason: `a trusted proxy forwarded no address it knew ("${client}")` })
        )
      }
      return Effect.succeed(normalise(client))
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
  const digest = digester(secret)
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
