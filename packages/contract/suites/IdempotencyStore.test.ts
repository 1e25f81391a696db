/**
 * The memory store: the shared store contract (./idempotencyStoreSuite.ts), then what only it has — its leases as
 * the middleware relies on them, its bound on records, its expiry heap.
 */
import { type DurationInput, durationOf, IllegalArgument, TestClock } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { IdempotencyStore } from "effect-resilience"
import { idempotencyStoreSuite } from "./idempotencyStoreSuite.js"

idempotencyStoreSuite("memory", IdempotencyStore.layerMemory)

const request = (key: string, ttl: DurationInput = "1 hour"): IdempotencyStore.ClaimRequest => ({
  scope: "s",
  key,
  fingerprint: "f",
  ttl: durationOf(ttl),
  lease: Duration.seconds(10)
})

describe("IdempotencyStore memory bounds", () => {
  it.effect("a new key fails with IdempotencyStoreFull; held keys and takeovers need no room", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 1, maxRecordsPerScope: 1 })
      expect((yield* store.claim(request("a")))._tag).toBe("Claimed")
      const full = yield* Effect.flip(store.claim(request("b")))
      expect(full).toBeInstanceOf(IdempotencyStore.IdempotencyStoreFull)
      expect(full).toMatchObject({ _tag: "IdempotencyStoreFull", maxRecords: 1 })
      // the held key is still answered; its owner died (lease over): taken over in place, no room needed
      expect((yield* store.claim(request("a")))._tag).toBe("InProgress")
      yield* TestClock.adjust("10 seconds")
      expect((yield* store.claim(request("a")))._tag).toBe("Claimed")
      expect(yield* store.size).toBe(1)
    }))

  it.effect("a full store makes room from expired records only, never from live ones", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 3, maxRecordsPerScope: 3 })
      yield* store.claim(request("short-1", "1 second"))
      yield* store.claim(request("short-2", "1 second"))
      yield* store.claim(request("long"))
      expect((yield* Effect.flip(store.claim(request("new-1"))))._tag).toBe("IdempotencyStoreFull")
      // a record is kept until both its TTL and its lease (10 s) are over
      yield* TestClock.adjust("10 seconds")
      // both expired records go, the live one stays
      expect((yield* store.claim(request("new-1")))._tag).toBe("Claimed")
      expect((yield* store.claim(request("new-2")))._tag).toBe("Claimed")
      // still held (its lease ran out, so the same request would take it over; another one is refused)
      expect((yield* store.claim({ ...request("long"), fingerprint: "other" }))._tag).toBe("Mismatch")
      expect((yield* Effect.flip(store.claim(request("new-3"))))._tag).toBe("IdempotencyStoreFull")
    }))

  it.effect("one scope at its maxRecordsPerScope is refused a new key; the other scopes keep claiming", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 30 })
      const claim = (scope: string, key: string) => store.claim({ ...request(key), scope })
      for (let i = 0; i < 3; i++) expect((yield* claim("greedy", `g${i}`))._tag).toBe("Claimed")
      const full = yield* Effect.flip(claim("greedy", "g3"))
      expect(full).toMatchObject({ _tag: "IdempotencyStoreFull", maxRecords: 3, perScope: true })
      expect(full.message).toContain("maxRecordsPerScope")
      expect((yield* claim("greedy", "g0"))._tag).toBe("InProgress")
      for (const scope of ["a", "b"]) {
        for (let i = 0; i < 3; i++) expect((yield* claim(scope, `k${i}`))._tag).toBe("Claimed")
      }
      // an expiry gives the scope its place back
      yield* TestClock.adjust("1 hour")
      expect((yield* claim("greedy", "g3"))._tag).toBe("Claimed")
      expect(() => IdempotencyStore.makeMemory({ maxRecordsPerScope: 0 })).toThrow(/maxRecordsPerScope/)
    }))

  it.effect("a scope's cap counts its live records, whatever ends them", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 5, maxRecordsPerScope: 2 })
      const scoped = (scope: string, key: string, ttl: DurationInput = "1 hour") => ({ ...request(key, ttl), scope })
      const claimed = (scope: string, key: string, ttl?: DurationInput) =>
        Effect.map(store.claim(scoped(scope, key, ttl)), (r) => r._tag === "Claimed" ? r.token : r._tag)
      const a1 = yield* claimed("a", "1")
      yield* claimed("a", "2", "1 minute")
      const full = yield* Effect.flip(store.claim(scoped("a", "3")))
      expect(full).toMatchObject({ _tag: "IdempotencyStoreFull", maxRecords: 2, perScope: true })
      expect(full.message).toContain("maxRecordsPerScope")
      // other scopes are not refused; a takeover of a held key needs no room
      expect(yield* claimed("b", "1")).toMatch(/^m/)
      yield* TestClock.adjust("10 seconds")
      const taken = yield* claimed("a", "1")
      expect(taken).toMatch(/^m/)
      expect((yield* Effect.flip(store.claim(scoped("a", "3"))))._tag).toBe("IdempotencyStoreFull")
      // the old token releases nothing (the takeover owns the key); the owner's release frees a place
      yield* store.release({ scope: "a", key: "1", token: a1 })
      expect((yield* Effect.flip(store.claim(scoped("a", "3"))))._tag).toBe("IdempotencyStoreFull")
      yield* store.release({ scope: "a", key: "1", token: taken })
      expect(yield* claimed("a", "3")).toMatch(/^m/)
      expect((yield* Effect.flip(store.claim(scoped("a", "4"))))._tag).toBe("IdempotencyStoreFull")
      // so does an expiry
      yield* TestClock.adjust("1 minute")
      expect(yield* claimed("a", "4")).toMatch(/^m/)
      expect(yield* store.size).toBe(3)
      // the store's own bound comes first: a full store refuses every scope alike
      yield* claimed("c", "1")
      yield* claimed("c", "2")
      const storeFull = yield* Effect.flip(store.claim(scoped("d", "1")))
      expect(storeFull).toMatchObject({ _tag: "IdempotencyStoreFull", maxRecords: 5 })
      expect("perScope" in storeFull && storeFull.perScope).toBeFalsy()
      expect(() => IdempotencyStore.makeMemory({ maxRecordsPerScope: 1.5 })).toThrow(/maxRecordsPerScope/)
    }))

  it.effect("released records and renewals do not grow its expiry heap past its records", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ maxRecords: 10 })
      const pending = (store as unknown as { pendingExpiries: () => number }).pendingExpiries
      for (let i = 0; i < 20_000; i++) {
        const claim = yield* store.claim({ ...request(`k${i}`, "24 hours"), lease: Duration.seconds(60) })
        if (claim._tag !== "Claimed") return yield* Effect.die(new Error("expected a claim"))
        const ref = { scope: "s", key: `k${i}`, token: claim.token }
        yield* store.renew(ref, Duration.seconds(60))
        yield* store.release(ref)
      }
      expect(yield* store.size).toBe(0)
      expect(pending()).toBeLessThanOrEqual(1_024 + 1)
    }))

  it("an IdempotencyStoreError's message never throws, whatever its cause", () => {
    const error = new IdempotencyStore.IdempotencyStoreError({ operation: "claim", cause: Object.create(null) })
    expect(error.message).toBe("idempotency store claim failed: [object Object]")
    const plain = new IdempotencyStore.IdempotencyStoreError({ operation: "renew", cause: new Error("down") })
    expect(plain.message).toBe("idempotency store renew failed: Error: down")
  })

  it("rejects a bound that could never hold a record", () => {
    expect(() => IdempotencyStore.makeMemory({ maxRecords: 0 })).toThrow(IllegalArgument)
    expect(() => IdempotencyStore.layerMemoryWith({ maxRecords: 1.5 })).toThrow(/maxRecords/)
    expect(() => IdempotencyStore.makeMemory({ maxRecords: Infinity })).not.toThrow()
  })
})

// The memory store's leases, as the idempotency middleware relies on them.

const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(IdempotencyStore.layerMemory))

describe("IdempotencyStore memory leases", () => {
  it.effect("a claim left by a crashed process is taken over after the lease", () =>
    withStore(Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      // a "crashed" owner: it claimed the key and will never renew, complete or release it
      const stale = yield* store.claim({
        scope: "s",
        key: "orphan",
        fingerprint: "f",
        ttl: Duration.hours(24),
        lease: Duration.seconds(60)
      })
      expect(stale._tag).toBe("Claimed")
      const again = yield* store.claim({
        scope: "s",
        key: "orphan",
        fingerprint: "f",
        ttl: Duration.hours(24),
        lease: Duration.seconds(60)
      })
      expect(again._tag).toBe("InProgress")
      yield* TestClock.adjust("61 seconds")
      const takeover = yield* store.claim({
        scope: "s",
        key: "orphan",
        fingerprint: "f",
        ttl: Duration.hours(24),
        lease: Duration.seconds(60)
      })
      expect(takeover._tag).toBe("Claimed")
      const response = { status: 201, headers: {}, body: new Uint8Array() }
      // the old owner's late completion is refused; the new owner's is accepted
      expect(
        yield* store.complete({ scope: "s", key: "orphan", token: (stale as any).token }, response, Duration.hours(1))
      )
        .toBe(false)
      expect(
        yield* store.complete(
          { scope: "s", key: "orphan", token: (takeover as any).token },
          response,
          Duration.hours(1)
        )
      )
        .toBe(true)
    })))

  it.effect("the memory store never evicts a record early through entries of the record it replaced", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory()
      const request = {
        scope: "s",
        key: "k",
        fingerprint: "f",
        ttl: Duration.seconds(100),
        lease: Duration.seconds(10)
      }
      const a = yield* store.claim(request)
      yield* TestClock.adjust("1 second")
      yield* store.renew({ scope: "s", key: "k", token: (a as any).token }, Duration.seconds(10))
      yield* TestClock.adjust("1 second")
      yield* store.release({ scope: "s", key: "k", token: (a as any).token })
      yield* TestClock.adjust("1 second")
      const b = yield* store.claim(request)
      yield* TestClock.adjust("1 second")
      const response = { status: 201, headers: {}, body: new Uint8Array([1]) }
      expect(yield* store.complete({ scope: "s", key: "k", token: (b as any).token }, response, Duration.seconds(100)))
        .toBe(true)
      yield* TestClock.adjust("97 seconds") // t = 101: B's record is kept until t = 104
      expect((yield* store.claim(request))._tag).toBe("Completed")
    }))
})
