import type { HttpServerRequest } from "@effect/platform"
import { Data, Effect, Option, Redacted } from "effect"
import { createHash, createHmac } from "node:crypto"
import { isIP } from "node:net"
import type { AddressOptions, ClientScope } from "../../http/ClientScope.js"
import * as validate from "../validate.js"
import { problem } from "./problem.js"

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

/**
 * A forwarded node without its port and IPv6 brackets: `[2001:db8::1]:443` and `[2001:db8::1]` are
 * `2001:db8::1`, `192.0.2.1:8080` is `192.0.2.1`; a bare IPv6 address is kept as it is.
 */
const withoutPort = (node: string): string => {
  if (node.startsWith("[")) {
    const close = node.indexOf("]")
    return close === -1 ? node : node.slice(1, close)
  }
  const colon = node.indexOf(":")
  return colon !== -1 && node.indexOf(":", colon + 1) === -1 ? node.slice(0, colon) : node
}

/** `X-Forwarded-For: client, proxy1, proxy2`: the entries, leftmost first. */
const xForwardedFor = (value: string): Array<string> => value.split(",").map((part) => withoutPort(part.trim()))

const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const quotedString = /^"(?:[^"\\]|\\.)*"$/

/**
 * RFC 7239 `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"`: the `for` node of each element,
 * leftmost first, without quotes, brackets and port ("" when an element has none) — or `undefined` when the
 * header is malformed anywhere. Strictly: a client that leaves a quote open would otherwise swallow the
 * element the trusted proxy appends after its own, and choose the address read as the proxy's.
 */
const forwarded = (value: string): Array<string> | undefined => {
  const elements = splitOutsideQuotes(value, ",")
  if (elements === undefined) return undefined
  const nodes: Array<string> = []
  for (const element of elements) {
    let node = ""
    if (element.trim() !== "") {
      const seen = new Set<string>()
      for (const raw of splitOutsideQuotes(element, ";")!) {
        const pair = raw.trim()
        const eq = pair.indexOf("=")
        const name = pair.slice(0, eq).toLowerCase()
        const text = pair.slice(eq + 1)
        if (eq <= 0 || !token.test(name) || seen.has(name)) return undefined
        seen.add(name)
        if (!token.test(text) && !quotedString.test(text)) return undefined
        if (name === "for") node = text.startsWith("\"") ? text.slice(1, -1).replace(/\\(.)/g, "$1") : text
      }
    }
    nodes.push(withoutPort(node))
  }
  return nodes
}

/**
 * Splits on `separator` outside double-quoted strings, in one linear pass; `undefined` when a quoted string
 * is left open (or ends in a lone backslash).
 */
const splitOutsideQuotes = (value: string, separator: string): Array<string> | undefined => {
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
  if (quoted) return undefined
  parts.push(value.slice(start))
  return parts
}

/** Text a client wrote, for a log line: quoted, and cut short. */
const shown = (text: string): string => JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text)

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
      if (hops === 0) return Effect.succeed(normalise(peer))
      // the chain from this server outwards: the peer, then what each trusted proxy says it was connected to
      const raw = request.headers[header]
      const entries = raw === undefined ? [] : header === "forwarded" ? forwarded(raw) : xForwardedFor(raw)
      if (entries === undefined) {
        return Effect.fail(new NoClientIdentity({ reason: `the ${header} header is malformed` }))
      }
      const chain = [peer, ...entries.reverse()]
      if (chain.length <= hops) {
        // fewer hops than trusted proxies: it did not come through them all, and the address that is left
        // (perhaps a proxy's own) would be shared by every client behind it
        return Effect.fail(
          new NoClientIdentity({
            reason: `the request has ${chain.length - 1} forwarded hop(s) for ${hops} trusted proxies`
          })
        )
      }
      const client = chain[hops]!
      if (isIP(client) === 0) {
        return Effect.fail(new NoClientIdentity({ reason: `a trusted proxy forwarded no address (${shown(client)})` }))
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
