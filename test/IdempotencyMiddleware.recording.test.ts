/**
 * A handler that ran, whose answer the store failed to record (Redis down right after the handler): the
 * middleware records it again in the background, so a retry after the lease gets the replay instead of
 * running the handler a second time. TestClock time; the store is the memory store behind a switch.
 */
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "../src/index.js"
import { post, serve, TestServer } from "./support/httpServer.js"

/** The memory store, failing every call while `down`; counts the calls to `complete`. */
const switchedStore = Effect.gen(function*() {
  const memory = yield* IdempotencyStore.makeMemory
  const state = { down: false, completes: 0 }
  const guard = <A, E>(
    operation: IdempotencyStore.IdempotencyStoreError["operation"],
    effect: Effect.Effect<A, E>
  ): Effect.Effect<A, E | IdempotencyStore.IdempotencyStoreError> =>
    Effect.suspend((): Effect.Effect<A, E | IdempotencyStore.IdempotencyStoreError> =>
      state.down
        ? Effect.fail(new IdempotencyStore.IdempotencyStoreError({ operation, cause: "the store is down" }))
        : effect
    )
  const store: IdempotencyStore.Store = {
    claim: (request) => guard("claim", memory.claim(request)),
    complete: (ref, response, ttl) =>
      Effect.suspend(() => {
        state.completes++
        return guard("complete", memory.complete(ref, response, ttl))
      }),
    renew: (ref, lease) => guard("renew", memory.renew(ref, lease)),
    release: (ref) => guard("release", memory.release(ref))
  }
  return { store, state }
})

/** Orders whose handler commits, then the store goes down before its answer is recorded. */
const setup = (options: IdempotencyMiddleware.Options = { lease: "60 seconds" }) =>
  Effect.gen(function*() {
    const { state, store } = yield* switchedStore
    let runs = 0
    const router = HttpRouter.empty.pipe(
      HttpRouter.post(
        "/orders",
        Effect.sync(() => {
          runs++
          state.down = true // the store dies after the commit, before the answer is recorded
          return HttpServerResponse.unsafeJson({ id: runs }, { status: 201 })
        })
      )
    )
    const middleware = yield* IdempotencyMiddleware.make(options).pipe(
      Effect.provideService(IdempotencyStore.IdempotencyStore, store)
    )
    yield* serve(router.pipe(middleware))
    return { state, runs: () => runs }
  })

describe("IdempotencyMiddleware: an answer the store failed to record", () => {
  it.scoped("is recorded once the store is back, so a retry after the lease is a replay, not a second run", () =>
    Effect.gen(function*() {
      const { runs, state } = yield* setup()
      const first = yield* post("/orders", { key: "k" })
      expect(first.status).toBe(201) // the client gets the answer of the handler that ran
      expect(state.completes).toBe(1)
      const during = yield* post("/orders", { key: "k" })
      expect(during.status).toBe(503) // the store is down: refused, the handler does not run
      yield* TestClock.adjust("5 seconds") // still down: the recording is tried again, and fails
      expect(state.completes).toBeGreaterThan(3)
      state.down = false
      yield* TestClock.adjust("2 seconds") // at most a second between attempts
      yield* TestClock.adjust("60 seconds") // the lease has run out
      const after = yield* post("/orders", { key: "k" })
      expect(after.status).toBe(201)
      expect(after.headers["idempotent-replayed"]).toBe("true")
      expect(JSON.parse(after.body)).toEqual({ id: 1 })
      expect(runs()).toBe(1)
    }).pipe(Effect.provide(TestServer)))

  it.scoped("is recorded after an outage longer than the lease when no retry took the key over", () =>
    Effect.gen(function*() {
      const { runs, state } = yield* setup()
      expect((yield* post("/orders", { key: "k" })).status).toBe(201)
      yield* TestClock.adjust("90 seconds") // down for longer than the lease
      const attempts = state.completes
      state.down = false
      yield* TestClock.adjust("2 seconds")
      expect(state.completes).toBe(attempts + 1) // recorded: no more attempts
      yield* TestClock.adjust("10 seconds")
      expect(state.completes).toBe(attempts + 1)
      const after = yield* post("/orders", { key: "k" })
      expect(after.headers["idempotent-replayed"]).toBe("true")
      expect(runs()).toBe(1)
    }).pipe(Effect.provide(TestServer)))

  it.scoped("stops when the key was taken over: the new owner's answer is the one kept", () =>
    Effect.gen(function*() {
      const { runs, state } = yield* setup()
      expect((yield* post("/orders", { key: "k" })).status).toBe(201)
      yield* TestClock.adjust("61 seconds") // the lease ran out while the store was down
      state.down = false
      // a retry reaches the store before the next attempt to record: it takes the key over (the race a
      // store down for longer than the lease leaves), and its own answer is recorded… once the store is
      // back again (its handler takes the store down too)
      expect((yield* post("/orders", { key: "k" })).status).toBe(201)
      expect(runs()).toBe(2)
      state.down = false
      yield* TestClock.adjust("5 seconds")
      const attempts = state.completes
      yield* TestClock.adjust("30 seconds")
      expect(state.completes).toBe(attempts) // both recorders stopped: one recorded, one was refused
      const replay = yield* post("/orders", { key: "k" })
      expect(replay.headers["idempotent-replayed"]).toBe("true")
      expect(JSON.parse(replay.body)).toEqual({ id: 2 })
    }).pipe(Effect.provide(TestServer)))

  it.scoped("is given up once the record's ttl has passed: a store that never comes back is not tried forever", () =>
    Effect.gen(function*() {
      const { state } = yield* setup({ lease: "10 seconds", ttl: "2 minutes" })
      expect((yield* post("/orders", { key: "k" })).status).toBe(201)
      yield* TestClock.adjust("60 seconds")
      const midway = state.completes
      expect(midway).toBeGreaterThan(30) // about one attempt a second
      yield* TestClock.adjust("70 seconds") // past the ttl
      const last = state.completes
      expect(last).toBeGreaterThan(midway)
      yield* TestClock.adjust("10 minutes")
      expect(state.completes).toBe(last)
    }).pipe(Effect.provide(TestServer)))
})
