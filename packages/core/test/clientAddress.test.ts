import fc from "fast-check"
import { isIP } from "node:net"
import { describe, expect, it } from "vitest"
import {
  clientAddress,
  forwarded,
  REMEMBERED_ADDRESSES,
  rememberedDigests,
  xForwardedFor
} from "../src/clientAddress.js"
import { prop } from "./support/prop.js"

const ipv4 = fc.ipV4()
const junk = fc.array(fc.string().filter((s) => !s.includes(",")), { maxLength: 4 })

describe("core/clientAddress", () => {
  it("is the peer when no proxy is trusted, whatever the header says", () => {
    expect(clientAddress("192.0.2.7", "127.0.0.1", 0, "x-forwarded-for", isIP)).toEqual({
      _tag: "Address",
      address: "192.0.2.7"
    })
    expect(clientAddress("::FFFF:192.0.2.7", undefined, 0, "x-forwarded-for", isIP)).toEqual({
      _tag: "Address",
      address: "192.0.2.7"
    })
    expect(clientAddress(undefined, undefined, 0, "x-forwarded-for", isIP)._tag).toBe("NoIdentity")
  })

  it("reads RFC 7239 nodes strictly", () => {
    expect(forwarded("for=192.0.2.60;proto=http, for=\"[2001:db8::17]:4711\"")).toEqual(["192.0.2.60", "2001:db8::17"])
    expect(forwarded("for=\"open, for=10.0.0.1")).toBeUndefined()
    expect(forwarded("for=1.2.3.4;for=5.6.7.8")).toBeUndefined()
    expect(xForwardedFor(" 1.2.3.4:80 , [::1]:443")).toEqual(["1.2.3.4", "::1"])
  })

  it("without enough hops, or with a forwarded non-address, there is no identity", () => {
    expect(clientAddress("10.0.0.1", undefined, 1, "x-forwarded-for", isIP)._tag).toBe("NoIdentity")
    expect(clientAddress("10.0.0.1", "unknown", 1, "x-forwarded-for", isIP)._tag).toBe("NoIdentity")
    expect(clientAddress("10.0.0.1", "for=\"x", 1, "forwarded", isIP)._tag).toBe("NoIdentity")
  })

  prop("what the client writes before the trusted proxies' entries never changes the answer", [
    ipv4,
    fc.array(ipv4, { minLength: 1, maxLength: 4 }),
    junk
  ], ([client, proxies, written]) => {
    // each proxy appends the address it was connected to; the last proxy is the server's peer
    const appended = [client, ...proxies.slice(0, -1)]
    const header = [...written, ...appended].join(", ")
    expect(clientAddress(proxies[proxies.length - 1], header, proxies.length, "x-forwarded-for", isIP)).toEqual({
      _tag: "Address",
      address: client
    })
  })
})

describe("core/clientAddress rememberedDigests", () => {
  it("digests each address once while it is remembered, and forgets all past the bound", () => {
    const digested: Array<string> = []
    const digest = rememberedDigests((s) => {
      digested.push(s)
      return `d(${s})`
    })
    expect([digest("a"), digest("b"), digest("a")]).toEqual(["d(a)", "d(b)", "d(a)"])
    expect(digested).toEqual(["a", "b"])
    for (let i = 2; i < REMEMBERED_ADDRESSES; i++) digest(`x${i}`)
    expect(digest("a")).toBe("d(a)")
    expect(digested).toHaveLength(REMEMBERED_ADDRESSES)
    // full: the next new address starts the memory again, so "a" is digested anew
    digest("new")
    expect(digest("a")).toBe("d(a)")
    expect(digested.slice(-2)).toEqual(["new", "a"])
  })
})
