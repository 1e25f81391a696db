import { HttpServerRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
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
