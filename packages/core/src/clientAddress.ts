/**
 * Who sent a request, from the connection's address and the forwarding header that trusted reverse proxies
 * append to (`X-Forwarded-For`, or RFC 7239 `Forwarded`). The client cannot choose the answer: only the
 * entries the trusted proxies wrote are read, counted from this server outwards.
 *
 * Telling an IP address from anything else is left to the caller (`isIp`, e.g. `node:net`'s `isIP`), so this
 * file stays free of any runtime.
 */

/** The client's address, or why there is none (the text is for a log line). */
export type ClientAddress =
  | { readonly _tag: "Address"; readonly address: string }
  | { readonly _tag: "NoIdentity"; readonly reason: string }

export type ForwardedHeader = "x-forwarded-for" | "forwarded"

/** 0 for text that is not an IP address, else 4 or 6. */
export type IpVersion = (text: string) => number

/** `::ffff:192.0.2.1` (an IPv4 client of a dual-stack socket) is `192.0.2.1`. */
export const normalise = (address: string, isIp: IpVersion): string => {
  const lower = address.toLowerCase()
  return lower.startsWith("::ffff:") && isIp(lower.slice(7)) === 4 ? lower.slice(7) : lower
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
export const xForwardedFor = (value: string): Array<string> => value.split(",").map((part) => withoutPort(part.trim()))

const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const quotedString = /^"(?:[^"\\]|\\.)*"$/

/**
 * RFC 7239 `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"`: the `for` node of each element,
 * leftmost first, without quotes, brackets and port ("" when an element has none) — or `undefined` when the
 * header is malformed anywhere. Strictly: a client that leaves a quote open would otherwise swallow the
 * element the trusted proxy appends after its own, and choose the address read as the proxy's.
 */
export const forwarded = (value: string): Array<string> | undefined => {
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

const none = (reason: string): ClientAddress => ({ _tag: "NoIdentity", reason })

/**
 * The client's address: the connection's (`peer`) when no proxy is trusted, else the address `trustedProxies`
 * hops out along the chain the proxies appended to `header` (`headerValue`, undefined when absent).
 */
export const clientAddress = (
  peer: string | undefined,
  headerValue: string | undefined,
  trustedProxies: number,
  header: ForwardedHeader,
  isIp: IpVersion
): ClientAddress => {
  if (peer === undefined || peer === "") {
    return none("the connection has no remote address (a Unix socket?): configure a scope")
  }
  if (trustedProxies === 0) return { _tag: "Address", address: normalise(peer, isIp) }
  // the chain from this server outwards: the peer, then what each trusted proxy says it was connected to
  const entries = headerValue === undefined
    ? []
    : header === "forwarded"
    ? forwarded(headerValue)
    : xForwardedFor(headerValue)
  if (entries === undefined) return none(`the ${header} header is malformed`)
  const chain = [peer, ...entries.reverse()]
  if (chain.length <= trustedProxies) {
    // fewer hops than trusted proxies: it did not come through them all, and the address that is left
    // (perhaps a proxy's own) would be shared by every client behind it
    return none(`the request has ${chain.length - 1} forwarded hop(s) for ${trustedProxies} trusted proxies`)
  }
  const client = chain[trustedProxies]!
  if (isIp(client) === 0) return none(`a trusted proxy forwarded no address (${shown(client)})`)
  return { _tag: "Address", address: normalise(client, isIp) }
}

/** Addresses whose digests {@link rememberedDigests} keeps at most; past that it starts again, empty. */
export const REMEMBERED_ADDRESSES = 1024

/**
 * `digest`, remembering its answers for up to {@link REMEMBERED_ADDRESSES} scopes (a few clients send most
 * requests). Only for addresses: a scope function's values may be credentials, and are never kept.
 */
export const rememberedDigests = (digest: (scope: string) => string): (scope: string) => string => {
  const known = new Map<string, string>()
  return (scope) => {
    let d = known.get(scope)
    if (d === undefined) {
      if (known.size >= REMEMBERED_ADDRESSES) known.clear()
      known.set(scope, d = digest(scope))
    }
    return d
  }
}
