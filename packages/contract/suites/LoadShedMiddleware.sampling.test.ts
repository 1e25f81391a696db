import {
  fork,
  type Forked,
  HttpServerRequest,
  HttpServerResponse,
  jsonResponse,
  pollUnsafe,
  recordingSleeps,
  scoped,
  sleepersAt,
  TestClock,
  yieldNow
} from "#edition"
import { describe, expect } from "@effect/vitest"
import { Clock, Effect, Fiber, Layer } from "effect"
import {
  DeadlineMiddleware,
  IdempotencyMiddleware,
  IdempotencyStore,
  LoadShedMiddleware,
  RateLimiter,
  RateLimiterStore,
  RateLimitMiddleware
} from "effect-resilience"

type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

// What the load-shed limiter learns from: the work the server does, not the answers it gives without doing it.

/** Lets forked fibers run until they block. */
const settle = Effect.repeat(yieldNow, { times: 50 })

/**
 * Waits, yielding to I/O (the bodies of web requests are read through promises), until each of `fibers` has
 * either ended or gone to sleep on the TestClock until `wakeAt`.
 */
const untilQuiet = (fibers: ReadonlyArray<Forked<unknown, unknown>>, wakeAt: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000; i++) {
      yield* settle
      const sleeping = yield* sleepersAt(wakeAt)
      const done = fibers.filter((fiber) => pollUnsafe(fiber) !== undefined).length
      if (sleeping + done >= fibers.length) return
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
    return yield* Effect.die(new Error("the requests did not settle"))
  })

const requestTo = (path: string, init: { key?: string; body?: string; headers?: Record<string, string> } = {}) =>
  HttpServerRequest.fromWeb(
    new Request(`http://127.0.0.1${path}`, {
      method: "POST",
      body: init.body ?? "{}",
      headers: { ...(init.key === undefined ? {} : { "idempotency-key": init.key }), ...init.headers }
    })
  )

const call = <E, R>(app: App<E, R>, request: HttpServerRequest.HttpServerRequest) =>
  Effect.provideService(app, HttpServerRequest.HttpServerRequest, request)

/**
 * Six rounds of 50 concurrent requests to `path`, each handled in 10 ms (after `leadMillis` the app takes before
 * its handler starts): how many each round admitted. The
 * limiter starts at 4 (3 for `default` requests, with the shares) and grows while requests come back as fast as
 * the fastest it has seen.
 */
const rounds = <E, R>(app: App<E, R>, path: string, ran: () => number, leadMillis = 0) =>
  Effect.gen(function*() {
    const admitted: Array<number> = []
    for (let round = 0; round < 6; round++) {
      const before = ran()
      const fibers = yield* Effect.forEach(
        Array.from({ length: 50 }, (_, i) => i),
        // forked one after another by this fiber: a fork inside a concurrent forEach's worker would end with it
        (i) => fork(Effect.exit(call(app, requestTo(path, { key: `round-${round}-${i}` }))))
      )
      if (leadMillis > 0) {
        yield* untilQuiet(fibers, (yield* Clock.currentTimeMillis) + leadMillis)
        yield* TestClock.adjust(leadMillis)
      }
      yield* untilQuiet(fibers, (yield* Clock.currentTimeMillis) + 10)
      admitted.push(ran() - before)
      yield* TestClock.adjust("10 millis")
      yield* Effect.forEach(fibers, Fiber.join)
    }
    return admitted
  })

/** A handler that takes 10 ms, and how often it ran. */
const tenMillis = () => {
  let ran = 0
  const handler = Effect.sync(() => ran++).pipe(
    Effect.andThen(Effect.sleep("10 millis")),
    Effect.as(jsonResponse({ ok: true }, { status: 201 }))
  )
  return { handler, ran: () => ran }
}

/** Runs `run` without and with the answers that must teach the limiter nothing: the rounds must not differ. */
const compare = <E>(run: (spoiled: boolean) => Effect.Effect<ReadonlyArray<number>, E>) =>
  Effect.gen(function*() {
    const unspoiled = yield* recordingSleeps(run(false))
    // the limit grows while nothing queues (with the Vegas default of this writing: 3, 7, 14, 25, 39, 50)
    expect(unspoiled[5]).toBeGreaterThan(unspoiled[0]!)
    expect(yield* recordingSleeps(run(true))).toEqual(unspoiled)
  })

describe("LoadShedMiddleware sampling", () => {
  scoped(
    "a handler that fails is no sample: one fast failure does not pin the limit",
    () =>
      compare((withFailure) =>
        Effect.scoped(Effect.gen(function*() {
          const shed = yield* LoadShedMiddleware.make()
          const work = tenMillis()
          const app = shed(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
            request.url.startsWith("/fail")
              ? Effect.andThen(Effect.sleep("1 millis"), Effect.fail("the handler failed" as const))
              : work.handler))
          if (withFailure) {
            const failed = yield* fork(Effect.flip(call(app, requestTo("/fail"))))
            yield* settle
            yield* TestClock.adjust("1 millis")
            // the app's failure still reaches the server as it was
            expect(yield* Fiber.join(failed)).toBe("the handler failed")
          }
          return yield* rounds(app, "/work", work.ran)
        }))
      )
  )

  scoped(
    "answers given without the work — a missing key, 409, 422, a replay, an inner 429 — are no samples",
    () =>
      compare((withFastAnswers) =>
        Effect.scoped(Effect.gen(function*() {
          const shed = yield* LoadShedMiddleware.make()
          const scope = () => Effect.succeed("one client")
          const idempotent = yield* IdempotencyMiddleware.make({ scope })
          const quota = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 0.001 })
          const order = tenMillis()
          const orders = order.handler.pipe(idempotent)
          const quotaed = order.handler.pipe(RateLimitMiddleware.make({ limiter: quota, scope }))
          const router = Effect.flatMap(
            HttpServerRequest.HttpServerRequest,
            (request) => request.url.startsWith("/orders") ? orders : quotaed
          )
          // a millisecond of network or parsing before anything answers: every answer takes some time
          const app = shed(Effect.andThen(Effect.sleep("1 millis"), router))
          /** Sends `request` and waits past the millisecond before anything answers it. */
          const start = (request: HttpServerRequest.HttpServerRequest) =>
            Effect.gen(function*() {
              const fiber = yield* fork(call(app, request))
              yield* untilQuiet([fiber], (yield* Clock.currentTimeMillis) + 1)
              yield* TestClock.adjust("1 millis")
              return fiber
            })
          const answer = (request: HttpServerRequest.HttpServerRequest) =>
            Effect.gen(function*() {
              const fiber = yield* start(request)
              yield* untilQuiet([fiber], -1)
              return yield* Fiber.join(fiber)
            })
          const status = (request: HttpServerRequest.HttpServerRequest) =>
            Effect.map(answer(request), (response) => response.status)
          // Both runs do the same two pieces of work (samples of 11 ms: the first order with key "k", and the
          // quota's one token), so a limiter that windows its samples sees the same ones; only the run with the fast
          // answers adds, in between, the answers given in 1 ms without the work: of each kind enough to fill a
          // window, were they samples (a request's body can be read once: a new request each time).
          const times = (n: number) => <A, E2, R2>(effect: () => Effect.Effect<A, E2, R2>) =>
            Effect.forEach(Array.from({ length: n }), () => Effect.suspend(effect))
          const tenTimes = times(10)
          const first = yield* start(requestTo("/orders", { key: "k" }))
          yield* untilQuiet([first], (yield* Clock.currentTimeMillis) + 10)
          if (withFastAnswers) {
            expect(yield* status(requestTo("/orders"))).toBe(400) // no key
            // in progress: five fit in the first order's 10 ms
            expect(yield* times(5)(() => status(requestTo("/orders", { key: "k" })))).toEqual(Array(5).fill(409))
          }
          yield* TestClock.adjust("10 millis")
          expect((yield* Fiber.join(first)).status).toBe(201)
          if (withFastAnswers) {
            expect(yield* tenTimes(() => status(requestTo("/orders")))).toEqual(Array(10).fill(400)) // no key
            expect(yield* tenTimes(() => status(requestTo("/orders", { key: "k", body: "{\"other\":1}" })))).toEqual(
              Array(10).fill(422)
            )
            // replays by the dozen: a windowed limiter shrugs off one fast sample, not a window full of them
            for (let i = 0; i < 40; i++) {
              const replayed = yield* answer(requestTo("/orders", { key: "k" }))
              expect(replayed.status).toBe(201)
              expect(replayed.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
            }
          }
          const limited = yield* start(requestTo("/limited"))
          yield* untilQuiet([limited], (yield* Clock.currentTimeMillis) + 10)
          if (withFastAnswers) expect(yield* tenTimes(() => status(requestTo("/limited")))).toEqual(Array(10).fill(429))
          yield* TestClock.adjust("10 millis")
          expect((yield* Fiber.join(limited)).status).toBe(201)
          expect(order.ran()).toBe(2)
          return yield* rounds(app, "/orders", order.ran, 1)
        })).pipe(Effect.provide(Layer.merge(IdempotencyStore.layerMemory, RateLimiterStore.layerMemory)))
      )
  )

  scoped(
    "a deadline's 504 inside the middleware is no sample: a client's short deadline teaches nothing",
    () =>
      compare((withShortDeadline) =>
        Effect.scoped(Effect.gen(function*() {
          const shed = yield* LoadShedMiddleware.make()
          const work = tenMillis()
          const app = shed(DeadlineMiddleware.make()(work.handler))
          if (withShortDeadline) {
            const cut = yield* fork(call(app, requestTo("/work", { headers: { "request-timeout-ms": "1" } })))
            yield* settle
            yield* TestClock.adjust("1 millis")
            expect((yield* Fiber.join(cut)).status).toBe(504)
            yield* TestClock.adjust("10 millis")
          }
          return yield* rounds(app, "/work", work.ran)
        }))
      )
  )
})
