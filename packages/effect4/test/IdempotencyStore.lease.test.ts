import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import { IdempotencyStore } from "../src/index.js"

// The memory store's leases, as the idempotency middleware relies on them (ported with the middleware's suite).

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
