import { edition, HttpServerRequest, readBody, withBody } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { Readable } from "node:stream"

/** A Node request stream as the HTTP parser leaves it: `complete` once the whole message was received. */
const nodeStream = (parts: ReadonlyArray<string>, complete: boolean) => {
  const stream = Object.assign(new Readable({ read() {} }), { complete })
  for (const part of parts) stream.push(Buffer.from(part))
  if (complete) stream.push(null)
  return stream
}
const overNode = (source: Readable) => ({ source, headers: {} }) as unknown as HttpServerRequest.HttpServerRequest
const text = (body: Uint8Array | string) => typeof body === "string" ? body : new TextDecoder().decode(body)

describe("requestBody", () => {
  it("a message received whole is read at once, without waiting for the stream's end", () => {
    expect(text(Effect.runSync(readBody(overNode(nodeStream(["{\"sku\":", "\"A\"}"], true)), 100))))
      .toBe("{\"sku\":\"A\"}")
    expect(Effect.runSync(readBody(overNode(nodeStream([], true)), 100))).toEqual(new Uint8Array(0))
    expect(Effect.runSync(readBody(overNode(nodeStream(["0123456789"], true)), 4))).toBe("too-large")
  })

  it.effect("a message still arriving is read as it arrives", () =>
    Effect.gen(function*() {
      const stream = nodeStream(["ab"], false)
      setImmediate(() => {
        stream.push(Buffer.from("cd"))
        stream.push(null)
      })
      expect(text(yield* readBody(overNode(stream), 100))).toBe("abcd")
    }))

  it.effect("a web request read before: the bytes it kept; its text only where that gives them back", () =>
    Effect.gen(function*() {
      const hexOf = (body: unknown) => body instanceof Uint8Array ? Buffer.from(body).toString("hex") : body
      /** A web request of `hex`'s bytes, read first by something else as `read`; what readBody then gives. */
      const readAfter = (
        read: "text" | "arrayBuffer" | "stream",
        hex: string,
        options: { readonly length?: number; readonly copy?: boolean } = {}
      ) =>
        Effect.gen(function*() {
          const request = HttpServerRequest.fromWeb(
            new Request("http://localhost/orders", {
              method: "POST",
              body: Buffer.from(hex, "hex"),
              headers: options.length === undefined ? {} : { "content-length": String(options.length) }
            })
          )
          if (read === "stream") yield* Effect.orDie(Stream.runDrain(request.stream))
          else yield* Effect.orDie(read === "text" ? Effect.asVoid(request.text) : Effect.asVoid(request.arrayBuffer))
          // a copy (`request.modify`, as a router's prefix does) starts without the cache
          return hexOf(yield* readBody(options.copy === true ? request.modify({ url: "/elsewhere" }) : request, 100))
        })
      const utf8 = Buffer.from("{\"sku\":\"caf\u00e9\"}").toString("hex")
      const length = utf8.length / 2
      // read as bytes: the platform keeps them
      for (const hex of ["ff01", "fe01", "efbbbf7b7d"]) expect(yield* readAfter("arrayBuffer", hex)).toBe(hex)
      // read as text, valid UTF-8 of a known length: its bytes, a byte order mark included (the length tells)
      expect(yield* readAfter("text", utf8, { length })).toBe(utf8)
      expect(yield* readAfter("text", `efbbbf${utf8}`, { length: length + 3 })).toBe(`efbbbf${utf8}`)
      // read as a stream, or a copy that kept nothing: the bytes are gone, and none stand in for them
      expect(yield* readAfter("stream", utf8, { length })).toBe("consumed")
      expect(yield* readAfter("text", "ff01", { copy: true })).toBe("consumed")
      // too large, whatever kept it
      expect(yield* readAfter("arrayBuffer", "00".repeat(101))).toBe("too-large")
      expect(yield* readAfter("text", "41".repeat(101), { length: 101 })).toBe("too-large")
      // text that is not UTF-8 (ff01 and fe01 decode to one text), or of no known length: Effect 4's request keeps
      // the bytes whoever read them; Effect 3's keeps only the text, which cannot be trusted to give them back
      for (const [hex, known] of [["ff01", 2], ["fe01", 2], [utf8, undefined]] as const) {
        expect(yield* readAfter("text", hex, known === undefined ? {} : { length: known }))
          .toBe(edition === "effect4" ? hex : "consumed")
      }
    }))

  it.effect("withBody copies the request instead of making it a prototype; the copy reads the body again", () =>
    Effect.gen(function*() {
      const request = HttpServerRequest.fromWeb(
        new Request("http://localhost/orders?x=1", { method: "POST", body: "abc", headers: { "x-a": "1" } })
      )
      const body = new TextEncoder().encode("abc")
      const wrapped = withBody(request, body)
      expect(Object.prototype.isPrototypeOf.call(request, wrapped)).toBe(false)
      expect(wrapped.method).toBe("POST")
      expect(wrapped.url).toBe(request.url)
      expect(wrapped.originalUrl).toBe(request.originalUrl)
      expect(wrapped.headers["x-a"]).toBe("1")
      expect(HttpServerRequest.TypeId in wrapped).toBe(true)
      expect(yield* wrapped.text).toBe("abc")
      expect(yield* readBody(wrapped, 10)).toBe(body)
      const moved = wrapped.modify({ url: "/elsewhere" })
      expect(moved.url).toBe("/elsewhere")
      expect(yield* moved.text).toBe("abc")
      // a second request of the same class takes the same path, with its own fields
      const other = withBody(
        HttpServerRequest.fromWeb(new Request("http://localhost/b", { method: "PATCH", body: "x" })),
        new TextEncoder().encode("x")
      )
      expect(other.method).toBe("PATCH")
      expect(yield* other.text).toBe("x")
      expect(yield* wrapped.text).toBe("abc")
    }))

  it.effect("a request whose own properties are not plain fields is wrapped as it is", () =>
    Effect.gen(function*() {
      const base = HttpServerRequest.fromWeb(new Request("http://localhost/c", { method: "POST", body: "y" }))
      class Odd {
        get method() {
          return "POST"
        }
      }
      const odd = Object.defineProperty(Object.create(Odd.prototype), "url", { get: () => "/c", enumerable: true })
      Object.assign(odd, { source: base.source, headers: {} })
      const wrapped = withBody(odd as HttpServerRequest.HttpServerRequest, new TextEncoder().encode("y"))
      expect(Object.prototype.isPrototypeOf.call(odd, wrapped)).toBe(true)
      expect(wrapped.url).toBe("/c")
      expect(yield* wrapped.text).toBe("y")
    }))
})
