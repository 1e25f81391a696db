import { HttpServerRequest, IllegalArgument, withRemoteAddress } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { ClientScope } from "effect-resilience"

/** A request as the server sees it: the peer's address (if any) and the headers the client sent. */
const request = (remoteAddress: string | undefined, headers: Record<string, string> = {}) => {
  const base = HttpServerRequest.fromWeb(new Request("http://service.test/orders", { method: "POST", headers }))
  return remoteAddress === undefined ? base : withRemoteAddress(base, remoteAddress)
}

const scopeOf = (scope: ClientScope.ClientScope, r: HttpServerRequest.HttpServerRequest) =>
  Effect.runSync(
    Effect.match(scope(r), { onFailure: (failure) => ({ failure }), onSuccess: (success) => ({ success }) })
  )

/** What scopeOf gives for a request whose client is `success`. */
const succeed = (success: string) => ({ success })

/** Whether scopeOf found no identity. */
const isFailure = (result: ReturnType<typeof scopeOf>): boolean => "failure" in result

describe("ClientScope.address", () => {
  it("is the connection's address, whatever the headers say", () => {
    const scope = ClientScope.address()
    const spoofed = request("192.0.2.7", {
      "x-api-key": "127.0.0.1",
      "x-forwarded-for": "127.0.0.1",
      forwarded: "for=127.0.0.1"
    })
    expect(scopeOf(scope, spoofed)).toEqual(succeed("192.0.2.7"))
    // an IPv4 client of a dual-stack socket is the same client as over IPv4
    expect(scopeOf(scope, request("::ffff:192.0.2.7"))).toEqual(succeed("192.0.2.7"))
  })

  it("without an address (a Unix socket) there is no identity, never a shared one", () => {
    const result = scopeOf(ClientScope.address(), request(undefined))
    expect("failure" in result && result.failure).toBeInstanceOf(ClientScope.NoClientIdentity)
  })

  it("trusts exactly as many X-Forwarded-For hops as configured", () => {
    const one = ClientScope.address({ trustedProxies: 1 })
    // the proxy appended the address it saw; what the client wrote before it is ignored
    const viaProxy = request("10.0.0.1", { "x-forwarded-for": "127.0.0.1, 198.51.100.4" })
    expect(scopeOf(one, viaProxy)).toEqual(succeed("198.51.100.4"))
    // fewer hops than trusted proxies: it did not come through them (or a proxy forwarded nothing), and the
    // address left would be shared by everyone behind that proxy: no identity, not a shared one
    expect(isFailure(scopeOf(one, request("203.0.113.9")))).toBe(true)
    // ports and brackets some proxies write are not part of the address
    expect(scopeOf(one, request("10.0.0.1", { "x-forwarded-for": "198.51.100.4:5678" }))).toEqual(
      succeed("198.51.100.4")
    )
    expect(scopeOf(one, request("10.0.0.1", { "x-forwarded-for": "[2001:db8::1]:443" }))).toEqual(
      succeed("2001:db8::1")
    )
    expect(scopeOf(one, request("10.0.0.1", { "x-forwarded-for": "[2001:db8::1]" }))).toEqual(
      succeed("2001:db8::1")
    )
    const two = ClientScope.address({ trustedProxies: 2 })
    expect(scopeOf(two, request("10.0.0.1", { "x-forwarded-for": "6.6.6.6, 198.51.100.4, 10.0.0.2" }))).toEqual(
      succeed("198.51.100.4")
    )
    // duplicate headers arrive joined with commas: the same chain
    expect(scopeOf(two, request("10.0.0.1", { "x-forwarded-for": "198.51.100.4,10.0.0.2" }))).toEqual(
      succeed("198.51.100.4")
    )
  })

  it("reads RFC 7239 Forwarded: quoted, bracketed IPv6 and ports", () => {
    const one = ClientScope.address({ trustedProxies: 1, forwardedHeader: "forwarded" })
    const header = "for=127.0.0.1;proto=https, for=\"[2001:db8:cafe::17]:4711\";by=10.0.0.1"
    expect(scopeOf(one, request("10.0.0.1", { forwarded: header }))).toEqual(succeed("2001:db8:cafe::17"))
    expect(scopeOf(one, request("10.0.0.1", { forwarded: "for=\"198.51.100.4:8080\"" }))).toEqual(
      succeed("198.51.100.4")
    )
    expect(scopeOf(one, request("10.0.0.1", { forwarded: "proto=https;for=198.51.100.4" }))).toEqual(
      succeed("198.51.100.4")
    )
  })

  it("a client cannot swallow the proxy's Forwarded element with an open quote", () => {
    const one = ClientScope.address({ trustedProxies: 1, forwardedHeader: "forwarded" })
    // the client's own line, then the proxy's appended element: Node joins two lines with ", "
    for (
      const header of [
        "for=6.6.6.6;a=\", for=203.0.113.7",
        "for=6.6.6.6;a=\"x\\, for=203.0.113.7",
        "for=6.6.6.6;a=\", for=\"[2001:db8::7]\""
      ]
    ) {
      const result = scopeOf(one, request("10.0.0.1", { forwarded: header }))
      expect(isFailure(result), header).toBe(true)
    }
    // nor with a parameter it repeats, or a pair that is not token=value
    for (const header of ["for=6.6.6.6;for=1.1.1.1, for=203.0.113.7", "for 6.6.6.6, for=203.0.113.7"]) {
      expect(isFailure(scopeOf(one, request("10.0.0.1", { forwarded: header }))), header).toBe(true)
    }
    expect(scopeOf(one, request("10.0.0.1", { forwarded: "for=\"[6::6]\";by=x, for=203.0.113.7" }))).toEqual(
      succeed("203.0.113.7")
    )
  })

  it("a trusted hop that forwarded no address is no identity", () => {
    const one = ClientScope.address({ trustedProxies: 1 })
    for (const value of ["unknown", "", "not an address", "_hidden"]) {
      const result = scopeOf(one, request("10.0.0.1", { "x-forwarded-for": value }))
      expect(isFailure(result), value).toBe(true)
    }
    const forwarded = ClientScope.address({ trustedProxies: 1, forwardedHeader: "forwarded" })
    expect(isFailure(scopeOf(forwarded, request("10.0.0.1", { forwarded: "for=_hidden" })))).toBe(true)
  })

  it("stays linear on huge headers", () => {
    const one = ClientScope.address({ trustedProxies: 1 })
    const huge = `${"1.2.3.4, ".repeat(200_000)}198.51.100.4`
    expect(scopeOf(one, request("10.0.0.1", { "x-forwarded-for": huge }))).toEqual(succeed("198.51.100.4"))
    const forwarded = ClientScope.address({ trustedProxies: 1, forwardedHeader: "forwarded" })
    const quotes = `for="${"\\\"".repeat(300_000)}"`
    expect(isFailure(scopeOf(forwarded, request("10.0.0.1", { forwarded: quotes })))).toBe(true)
  })

  it("rejects invalid options when called", () => {
    for (const trustedProxies of [-1, 1.5, NaN]) {
      expect(() => ClientScope.address({ trustedProxies })).toThrow(IllegalArgument)
    }
    expect(() => ClientScope.address({ forwardedHeader: "x-real-ip" as "forwarded" })).toThrow(
      IllegalArgument
    )
  })
})
