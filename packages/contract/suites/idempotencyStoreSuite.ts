/**
 * The `IdempotencyStore.Store` contract, run against any store layer: memory in `IdempotencyStore.test.ts`,
 * Redis in `IdempotencyStore.redis.int.test.ts` and each edition's `redisCluster.int.test.ts` (which import it as
 * `./contract/idempotencyStoreSuite.js`), SQL in `IdempotencyStore.sql.int.test.ts`. Written once against the
 * adapter, like the suites, so compiled and run against each edition.
 *
 * Every test uses keys no other test (or other run against the same shared store) uses, so a shared
 * Redis or database needs no cleanup between tests. The layer is provided per test.
 *
 * Time: by default (`timeSource: "clock"`) the store must decide leases and TTLs with the caller's
 * `Clock`, and the tests move time with `TestClock.adjust`. A store that reads its server's clock
 * instead passes `timeSource: "server"`: the tests then run on the live clock with short leases and
 * TTLs and really sleep.
 */
import { TestClock } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import type { Layer } from "effect"
import { Duration, Effect } from "effect"
import { IdempotencyStore } from "effect-resilience"

export interface IdempotencyStoreSuiteOptions {
  /** Whose clock decides leases and TTLs; default `"clock"` (the caller's, so `TestClock` works). */
  readonly timeSource?: "clock" | "server"
}

let counter = 0
const run = `${process.pid}-${Date.now().toString(36)}`
/** A key no other test, run or process uses. */
const fresh = (prefix: string) => `${prefix}-${run}-${++counter}`

type Store = IdempotencyStore.Store

const response = (text: string, status = 201): IdempotencyStore.StoredResponse => ({
  status,
  headers: { "content-type": "application/json", location: "/orders/1" },
  body: new TextEncoder().encode(text)
})

/** Registers the store contract tests for a store. */
export const idempotencyStoreSuite = (
  storeName: string,
  layer: Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>,
  options: IdempotencyStoreSuiteOptions = {}
) => {
  const server = options.timeSource === "server"
  /** One time unit of the tests: a second of TestClock time, or 150 ms of real time. */
  const unit = server ? 150 : 1000
  const units = (n: number) => Duration.millis(n * unit)
  const elapse = (n: number) => server ? Effect.sleep(units(n)) : TestClock.adjust(units(n))

  const test = (name: string, body: (store: Store) => Effect.Effect<void, unknown>) =>
    (server ? it.live : it.effect)(
      name,
      () =>
        Effect.gen(function*() {
          return yield* body(yield* IdempotencyStore.IdempotencyStore)
        }).pipe(
          Effect.provide(layer),
          Effect.scoped
        ),
      server ? 20_000 : undefined
    )

  /** A claim request for `key` with lease 2 units and TTL 10 units, unless overridden. */
  const request = (
    key: string,
    overrides: Partial<IdempotencyStore.ClaimRequest> = {}
  ): IdempotencyStore.ClaimRequest => ({
    scope: "scope",
    key,
    fingerprint: "fp-1",
    ttl: units(10),
    lease: units(2),
    ...overrides
  })

  const claimed = (store: Store, req: IdempotencyStore.ClaimRequest) =>
    Effect.flatMap(store.claim(req), (result) => {
      expect(result._tag).toBe("Claimed")
      return result._tag === "Claimed"
        ? Effect.succeed<IdempotencyStore.ClaimRef>({ scope: req.scope, key: req.key, token: result.token })
        : Effect.die(new Error(`expected Claimed, got ${result._tag}`))
    })

  describe(`IdempotencyStore contract (${storeName})`, () => {
    test("of 100 concurrent claims of a fresh key exactly one is Claimed, the rest InProgress", (store) =>
      Effect.gen(function*() {
        const req = request(fresh("race"))
        const results = yield* Effect.all(Array.from({ length: 100 }, () => store.claim(req)), {
          concurrency: "unbounded"
        })
        expect(results.filter((r) => r._tag === "Claimed")).toHaveLength(1)
        expect(results.filter((r) => r._tag === "InProgress")).toHaveLength(99)
      }))

    test("a claim in progress answers InProgress; another fingerprint answers Mismatch", (store) =>
      Effect.gen(function*() {
        const key = fresh("busy")
        yield* claimed(store, request(key))
        expect((yield* store.claim(request(key)))._tag).toBe("InProgress")
        expect((yield* store.claim(request(key, { fingerprint: "fp-2" })))._tag).toBe("Mismatch")
      }))

    test("scopes keep keys apart, even when scope and key could be joined ambiguously", (store) =>
      Effect.gen(function*() {
        const key = fresh("scoped")
        yield* claimed(store, request(key, { scope: "alice" }))
        yield* claimed(store, request(key, { scope: "bob" }))
        yield* claimed(store, request(`b:${key}`, { scope: "a" }))
        yield* claimed(store, request(key, { scope: "a:b" }))
        // characters that mean something to a store's key syntax
        yield* claimed(store, request(`{${key}}:%x`, { scope: "{s}" }))
        expect((yield* store.claim(request(`{${key}}:%x`, { scope: "{s}" })))._tag).toBe("InProgress")
        // and to SQL or Lua, should they ever reach a statement as text: kept as plain data
        const injected = `'); DROP TABLE t; --"${key}\\`
        yield* claimed(store, request(injected, { scope: "' OR '1'='1" }))
        expect((yield* store.claim(request(injected, { scope: "' OR '1'='1" })))._tag).toBe("InProgress")
        yield* claimed(store, request(injected, { scope: "' OR '1'='2" }))
      }))

    test("complete stores the response; the same request replays it byte for byte", (store) =>
      Effect.gen(function*() {
        const key = fresh("done")
        const ref = yield* claimed(store, request(key))
        const body = new Uint8Array(256)
        for (let i = 0; i < 256; i++) body[i] = 255 - i // every byte value, invalid UTF-8 included
        const stored: IdempotencyStore.StoredResponse = {
          status: 201,
          headers: { "content-type": "application/octet-stream", location: "/orders/7" },
          body
        }
        expect(yield* store.complete(ref, stored, units(10))).toBe(true)
        const replay = yield* store.claim(request(key))
        expect(replay._tag).toBe("Completed")
        if (replay._tag !== "Completed") return
        expect(replay.response.status).toBe(201)
        expect(replay.response.headers).toEqual(stored.headers)
        expect(replay.response.body).toBeInstanceOf(Uint8Array)
        expect([...replay.response.body]).toEqual([...body])
        // a completed key with another fingerprint is still a mismatch
        expect((yield* store.claim(request(key, { fingerprint: "fp-2" })))._tag).toBe("Mismatch")
        // and an empty body survives too
        const empty = yield* claimed(store, request(fresh("empty")))
        expect(yield* store.complete(empty, { status: 204, headers: {}, body: new Uint8Array() }, units(10))).toBe(true)
        const emptyReplay = yield* store.claim(request(empty.key))
        expect(emptyReplay._tag === "Completed" && [emptyReplay.response.status, emptyReplay.response.body.length])
          .toEqual([204, 0])
      }))

    test("a completed claim cannot be completed, renewed or released again", (store) =>
      Effect.gen(function*() {
        const key = fresh("twice")
        const ref = yield* claimed(store, request(key))
        expect(yield* store.complete(ref, response("first"), units(10))).toBe(true)
        expect(yield* store.complete(ref, response("second"), units(10))).toBe(false)
        expect(yield* store.renew(ref, units(2))).toBe(false)
        yield* store.release(ref)
        const replay = yield* store.claim(request(key))
        expect(replay._tag === "Completed" && new TextDecoder().decode(replay.response.body)).toBe("first")
      }))

    test("after the lease the claim is taken over with a new token; the old owner is refused", (store) =>
      Effect.gen(function*() {
        const key = fresh("takeover")
        const stale = yield* claimed(store, request(key))
        yield* elapse(1)
        expect((yield* store.claim(request(key)))._tag).toBe("InProgress")
        yield* elapse(1.5) // 2.5 units: past the 2-unit lease, within the TTL
        // a mismatch is still a mismatch after the lease
        expect((yield* store.claim(request(key, { fingerprint: "fp-2" })))._tag).toBe("Mismatch")
        const fresher = yield* claimed(store, request(key))
        expect(fresher.token).not.toBe(stale.token)
        expect((yield* store.claim(request(key)))._tag).toBe("InProgress")
        // the old owner: its renewal, completion and release are refused and change nothing
        expect(yield* store.renew(stale, units(2))).toBe(false)
        expect(yield* store.complete(stale, response("stale"), units(10))).toBe(false)
        yield* store.release(stale)
        expect((yield* store.claim(request(key)))._tag).toBe("InProgress")
        expect(yield* store.complete(fresher, response("fresh"), units(10))).toBe(true)
        const replay = yield* store.claim(request(key))
        expect(replay._tag === "Completed" && new TextDecoder().decode(replay.response.body)).toBe("fresh")
      }))

    test("an owner whose lease ran out but was not taken over may still complete", (store) =>
      Effect.gen(function*() {
        const key = fresh("late")
        const ref = yield* claimed(store, request(key))
        yield* elapse(3)
        expect(yield* store.complete(ref, response("late"), units(10))).toBe(true)
        expect((yield* store.claim(request(key)))._tag).toBe("Completed")
      }))

    test("renew extends the lease, so a live owner is not taken over", (store) =>
      Effect.gen(function*() {
        const key = fresh("renew")
        const ref = yield* claimed(store, request(key))
        for (let i = 0; i < 4; i++) {
          yield* elapse(1)
          expect(yield* store.renew(ref, units(2))).toBe(true)
        }
        // 4 units after the claim, the original lease of 2 is long gone but the renewed one holds
        expect((yield* store.claim(request(key)))._tag).toBe("InProgress")
        yield* elapse(2.5)
        expect((yield* store.claim(request(key)))._tag).toBe("Claimed")
        expect(yield* store.renew(ref, units(2))).toBe(false)
      }))

    test("release forgets the claim so the next request runs; only the owner can release", (store) =>
      Effect.gen(function*() {
        const key = fresh("release")
        const ref = yield* claimed(store, request(key))
        yield* store.release({ ...ref, token: "not-the-owner" })
        expect((yield* store.claim(request(key)))._tag).toBe("InProgress")
        yield* store.release(ref)
        // released: even another fingerprint may claim now
        const again = yield* claimed(store, request(key, { fingerprint: "fp-2" }))
        expect(again.token).not.toBe(ref.token)
        expect(yield* store.complete(ref, response("old"), units(10))).toBe(false)
        expect(yield* store.complete(again, response("new"), units(10))).toBe(true)
        // releasing an unknown key is a no-op, not an error
        yield* store.release({ scope: "scope", key: fresh("unknown"), token: "t" })
      }))

    test("a completed record is replayed until its TTL passes, then forgotten", (store) =>
      Effect.gen(function*() {
        const key = fresh("ttl")
        const ref = yield* claimed(store, request(key))
        yield* elapse(1)
        // the completion's TTL counts from the completion
        expect(yield* store.complete(ref, response("one"), units(5))).toBe(true)
        yield* elapse(4.5)
        expect((yield* store.claim(request(key)))._tag).toBe("Completed")
        yield* elapse(1)
        const after = yield* claimed(store, request(key, { fingerprint: "fp-2" }))
        expect(after.token).not.toBe(ref.token)
      }))

    test("an in-progress claim past its TTL is gone: the owner can no longer complete it", (store) =>
      Effect.gen(function*() {
        const key = fresh("expired")
        const ref = yield* claimed(store, request(key, { ttl: units(3), lease: units(2) }))
        yield* elapse(3.5)
        expect(yield* store.complete(ref, response("late"), units(10))).toBe(false)
        expect(yield* store.renew(ref, units(2))).toBe(false)
        yield* claimed(store, request(key, { fingerprint: "fp-2" }))
      }))
  })
}
