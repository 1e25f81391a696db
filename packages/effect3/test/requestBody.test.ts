import { HttpServerRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { Readable } from "node:stream"
import { readBody, withBody } from "../src/internal/http/requestBody.js"

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

  it.effect("a web request read before: its bytes if it kept them, its text if that gives them back, else none", () =>
    Effect.gen(function*() {
      const hexOf = (body: unknown) => body instanceof Uint8Array ? Buffer.from(body).toString("hex") : body
      /** A web request of `hex`'s bytes, read first by something else as `read`; what readBody then gives. */
      const readAfter = (read: "text" | "arrayBuffer" | "stream", hex: string, length?: number) =>
        Effect.gen(function*() {
          const request = HttpServerRequest.fromWeb(
            new Request("http://localhost/orders", {
              method: "POST",
              body: Buffer.from(hex, "hex"),
              headers: length === undefined ? {} : { "content-length": String(length) }
            })
          )
          if (read === "stream") yield* Effect.orDie(Stream.runDrain(request.stream))
          else yield* Effect.orDie(read === "text" ? Effect.asVoid(request.text) : Effect.asVoid(request.arrayBuffer))
          return hexOf(yield* readBody(request, 100))
        })
      const utf8 = Buffer.from("{\"sku\":\"caf\u00e9\"}").toString("hex")
      // read as bytes: the platform keeps them
      expect(yield* readAfter("arrayBuffer", "ff01")).toBe("ff01")
      // read as text: valid UTF-8 gives its bytes back; text() drops a byte order mark, which the length tells
      expect(yield* readAfter("text", utf8, utf8.length / 2)).toBe(utf8)
      expect(yield* readAfter("text", `efbbbf${utf8}`, utf8.length / 2 + 3)).toBe(`efbbbf${utf8}`)
      // and without a length, or when it was not UTF-8, the bytes are gone: none stand in for them
      expect(yield* readAfter("text", utf8)).toBe("consumed")
      expect(yield* readAfter("text", "ff01", 2)).toBe("consumed")
      expect(yield* readAfter("text", "fe01", 2)).toBe("consumed")
      expect(yield* readAfter("stream", utf8, utf8.length / 2)).toBe("consumed")
      // too large, whatever kept it
      expect(yield* readAfter("arrayBuffer", "00".repeat(101))).toBe("too-large")
      expect(yield* readAfter("text", "41".repeat(101), 101)).toBe("too-large")
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
