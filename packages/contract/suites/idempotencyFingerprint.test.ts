import { fingerprint } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { createHash } from "node:crypto"

/** The fingerprint as the stores have always been given it: SHA-256 of `<method> <target>\n` and the body. */
const reference = (method: string, target: string, body: Uint8Array) =>
  createHash("sha256").update(`${method} ${target}\n`).update(body).digest("hex")

const bytes = (text: string) => new TextEncoder().encode(text)

describe("idempotency fingerprint", () => {
  it("is the SHA-256 of the method, the target and the body, whatever the path taken to compute it", () => {
    const cases: Array<[string, string, Uint8Array]> = [
      ["POST", "/orders", new Uint8Array(0)],
      ["POST", "/orders", bytes("{\"sku\":\"A\"}")],
      // the same length as the one before, other bytes: a reused buffer must not leak the earlier request
      ["POST", "/orders", bytes("{\"sku\":\"B\"}")],
      ["PATCH", "/orders/1?x=1", bytes("{\"sku\":\"A\"}")],
      // a target outside ASCII is hashed as UTF-8
      ["POST", "/commandes/é€", bytes("ü")],
      // bodies past the one-shot buffer, and just around its size
      ["POST", "/orders", new Uint8Array(16 * 1024 - 14).fill(7)],
      ["POST", "/orders", new Uint8Array(16 * 1024).fill(8)],
      ["POST", "/orders", new Uint8Array(100_000).fill(9)],
      // a view into a larger buffer: only its own bytes count
      ["POST", "/orders", new Uint8Array(bytes("xx{\"a\":1}yy").buffer, 2, 7)]
    ]
    for (const [method, target, body] of cases) {
      expect(fingerprint(method, target, body)).toBe(reference(method, target, body))
    }
    // twice the same request, the same fingerprint; another body, another fingerprint
    expect(fingerprint("POST", "/orders", bytes("{}"))).toBe(fingerprint("POST", "/orders", bytes("{}")))
    expect(fingerprint("POST", "/orders", bytes("{}"))).not.toBe(fingerprint("POST", "/orders", bytes("[]")))
  })
})
