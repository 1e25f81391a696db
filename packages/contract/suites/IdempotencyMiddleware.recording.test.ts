/**
 * A handler that ran, whose answer the store failed to record (Redis down right after the handler): the
 * middleware records it again in the background, so a retry after the lease gets the replay instead of
 * running the handler a second time. TestClock time; the store is the memory store behind a switch.
 */
import {
  captureLogsWithCause as captureLogs,
  HttpServerRequest,
  HttpServerResponse,
  jsonResponse,
  maxPendingRecordings,
  provideScope,
  recorder,
  scoped,
  serverRequestFrom,
  TestClock,
  withRandom,
  yieldNow
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Option, Scope } from "effect"
import { IdempotencyMiddleware, IdempotencyStore } from "effect-resilience"
import { serve } from "./support/idempotencyServer.js"

/** The memory store, failing every call while `down`; counts the calls to `complete`. */
const switchedStore = Effect.gen(function*() {
  const memory = yield* IdempotencyStore.makeMemory()
  const state = { down: false, completes: 0, completedAt: [] as Array<number> }
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
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        state.completes++
        state.completedAt.push(now)
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
    const orders = Effect.sync(() => {
      runs++
      state.down = true // the store dies after the commit, before the answer is recorded
      return jsonResponse({ id: runs }, { status: 201 })
    })
    const middleware = yield* IdempotencyMiddleware.make(options).pipe(
      Effect.provideService(IdempotencyStore.IdempotencyStore, store)
    )
    const send = yield* serve(orders.pipe(middleware))
    const post = (path: string, init: { readonly key: string }) => send({ path, key: init.key })
    return { state, runs: () => runs, post }
  })

describe("IdempotencyMiddleware: an answer the store failed to record", () => {
  scoped(
    "is recorded once the store is back, so a retry after the lease is a replay, not a second run",
    () =>
      Effect.gen(function*() {
        const { post, runs, state } = yield* setup()
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
      })
  )

  scoped(
    "is recorded after an outage longer than the lease when no retry took the key over",
    () =>
      Effect.gen(function*() {
        const { post, runs, state } = yield* setup()
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
      })
  )

  scoped("stops when the key was taken over: the new owner's answer is the one kept", () =>
    Effect.gen(function*() {
      const { post, runs, state } = yield* setup()
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
    }))

  scoped(
    "is given up once the record's ttl has passed: a store that never comes back is not tried forever",
    () =>
      Effect.gen(function*() {
        const { post, state } = yield* setup({ lease: "10 seconds", ttl: "2 minutes" })
        expect((yield* post("/orders", { key: "k" })).status).toBe(201)
        yield* TestClock.adjust("60 seconds")
        const midway = state.completes
        expect(midway).toBeGreaterThan(30) // about one attempt a second
        yield* TestClock.adjust("70 seconds") // past the ttl
        const last = state.completes
        expect(last).toBeGreaterThan(midway)
        yield* TestClock.adjust("10 minutes")
        expect(state.completes).toBe(last)
      })
  )
})

/** Runs `app` on a POST built in memory (no server, no socket) with the key `key`; returns its status. */
const postInMemory = <E>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, HttpServerRequest.HttpServerRequest>,
  key: string
) =>
  Effect.map(
    Effect.provideService(
      app,
      HttpServerRequest.HttpServerRequest,
      serverRequestFrom(
        new Request("http://service.test/orders", { method: "POST", headers: { "idempotency-key": key }, body: "{}" }),
        "10.0.0.1"
      )
    ),
    (response) => response.status
  )

/** A middleware built in `scope` with `store`, around a handler that calls `onRun` and answers 201. */
const inScope = (
  scope: Scope.Scope,
  store: IdempotencyStore.Store,
  onRun: () => void,
  options: IdempotencyMiddleware.Options = { lease: "60 seconds" }
) =>
  Effect.map(
    IdempotencyMiddleware.make(options).pipe(
      Effect.provideService(IdempotencyStore.IdempotencyStore, store),
      provideScope(scope)
    ),
    (middleware) =>
      middleware(Effect.sync(() => {
        onRun()
        return jsonResponse({ ok: true }, { status: 201 })
      }))
  )

describe("IdempotencyMiddleware: the background recordings are owned and bounded", () => {
  it.effect("stop when the scope the middleware was built in closes, with one error log that counts them", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const { state, store } = yield* switchedStore
      const scope = yield* Scope.make()
      const app = yield* inScope(scope, store, () => (state.down = true))
      expect(yield* postInMemory(app, "a")).toBe(201)
      state.down = false
      expect(yield* postInMemory(app, "b")).toBe(201)
      yield* TestClock.adjust("5 seconds")
      expect(state.completes).toBeGreaterThan(6) // both are tried again while the store is down
      yield* Scope.close(scope, Exit.void)
      expect(logs.lines.filter((l) => l.includes("never recorded"))).toEqual([
        expect.stringContaining("2 handlers' answers were never recorded")
      ])
      const attempts = state.completes
      yield* TestClock.adjust("10 minutes")
      expect(state.completes).toBe(attempts) // nothing outlives the scope
      // a handler that answers after the close is not tried again in the background either
      state.down = false
      expect(yield* postInMemory(app, "c")).toBe(201)
      yield* TestClock.adjust("10 minutes")
      expect(state.completes).toBe(attempts + 1)
      expect(logs.lines.some((l) => l.includes("not tried again: the middleware's scope has closed"))).toBe(true)
    }).pipe(Effect.provide(logs.layer))
  })

  it.effect(`keep at most ${maxPendingRecordings} answers: one more is dropped with an error log`, () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const memory = yield* IdempotencyStore.makeMemory({
        maxRecords: 2 * maxPendingRecordings,
        maxRecordsPerScope: 2 * maxPendingRecordings
      })
      const state = { down: true, completes: 0 }
      const store: IdempotencyStore.Store = {
        ...memory,
        complete: (ref, response, ttl) =>
          Effect.suspend(() => {
            state.completes++
            return state.down
              ? Effect.fail(new IdempotencyStore.IdempotencyStoreError({ operation: "complete", cause: "down" }))
              : memory.complete(ref, response, ttl)
          })
      }
      const scope = yield* Scope.make()
      let runs = 0
      const app = yield* inScope(scope, store, () => runs++)
      const last = `key-${maxPendingRecordings}`
      for (let i = 0; i <= maxPendingRecordings; i++) expect(yield* postInMemory(app, `key-${i}`)).toBe(201)
      const dropped = logs.lines.filter((l) => l.includes("already waiting to be recorded"))
      expect(dropped).toEqual([expect.stringContaining(`not tried again: ${maxPendingRecordings} answers`)])
      expect(dropped[0]).not.toContain(last)
      expect(yield* postInMemory(app, last)).toBe(409) // in progress: its lease has not run out
      yield* Scope.close(scope, Exit.void)
      expect(logs.lines.filter((l) => l.includes("never recorded"))).toEqual([
        expect.stringContaining(`${maxPendingRecordings} handlers' answers were never recorded`)
      ])
      expect(runs).toBe(maxPendingRecordings + 1)
    }).pipe(Effect.provide(logs.layer))
  })

  it.effect("make room again as recordings end", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const scope = yield* Scope.make()
      const later = yield* recorder(Option.some(scope), 2)
      const gates = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      const ended = yield* Deferred.make<void>()
      const recording = (gate: Deferred.Deferred<void>) =>
        Effect.ensuring(Deferred.await(gate), Deferred.succeed(ended, undefined))
      const start = (effect: Effect.Effect<void>) => later(effect, "down", (text) => text)
      yield* start(recording(gates[0]!))
      yield* start(recording(gates[1]!))
      yield* start(Effect.void) // a third: dropped
      expect(logs.lines.filter((l) => l.includes("2 answers are already waiting"))).toHaveLength(1)
      yield* Deferred.succeed(gates[0]!, undefined)
      yield* Deferred.await(ended)
      yield* yieldNow
      yield* start(Effect.never) // room for one again
      expect(logs.lines.filter((l) => l.includes("already waiting"))).toHaveLength(1)
      yield* Scope.close(scope, Exit.void)
      expect(logs.lines.filter((l) => l.includes("never recorded"))).toEqual([
        expect.stringContaining("2 handlers' answers were never recorded")
      ])
    }).pipe(Effect.provide(logs.layer))
  })

  it.effect("are at most a second apart, jitter included", () =>
    Effect.gen(function*() {
      const { state, store } = yield* switchedStore
      const scope = yield* Scope.make()
      const app = yield* inScope(scope, store, () => (state.down = true))
      expect(yield* postInMemory(app, "k")).toBe(201)
      yield* TestClock.adjust("20 seconds")
      const gaps = state.completedAt.slice(1).map((t, i) => t - state.completedAt[i]!)
      expect(gaps.length).toBeGreaterThan(15)
      expect(Math.max(...gaps)).toBeLessThanOrEqual(1000)
      expect(Math.max(...gaps)).toBeGreaterThan(900) // the cap is reached
      yield* Scope.close(scope, Exit.void)
    }).pipe(withRandom([1]))) // every pause drawn 20 % long
})
