import type { HttpApp } from "@effect/platform"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Layer, TestClock } from "effect"
import {
  DeadlineMiddleware,
  IdempotencyMiddleware,
  IdempotencyStore,
  LoadShedMiddleware,
  RateLimiter,
  RateLimiterStore,
  RateLimitMiddleware
} from "../src/index.js"

// What the load-shed limiter learns from: the work the server does, not the answers it gives without doing it.

/** Lets forked fibers run until they block. */
const settle = Effect.repeatN(Effect.yieldNow(), 50)

/**
 * Waits, yielding to I/O (the bodies of web requests are read through promises), until each of `fibers` has
 * either ended or gone to sleep on the TestClock until `wakeAt`.
 */
const untilQuiet = (fibers: ReadonlyArray<Fiber.RuntimeFiber<unknown, unknown>>, wakeAt: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000; i++) {
      yield* settle
      const sleeping = Chunk.filter(yield* TestClock.sleeps(), (at) => at === wakeAt).length
      const done = fibers.filter((fiber) => fiber.unsafePoll() !== null).length
      if (sleeping + done >= fibers.length) return
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
    return yield* Effect.dieMessage("the requests did not settle")
  })

const requestTo = (path: string, init: { key?: string; body?: string; headers?: Record<string, string> } = {}) =>
  HttpServerRequest.fromWeb(
    new Request(`http://127.0.0.1${path}`, {
      method: "POST",
      body: init.body ?? "{}",
      headers: { ...(init.key === undefined ? {} : { "idempotency-key": init.key }), ...init.headers }
    })
  )

const call = <E, R>(app: HttpApp.Default<E, R>, request: HttpServerRequest.HttpServerRequest) =>
  Effect.provideService(app, HttpServerRequest.HttpServerRequest, request)

/**
 * Six rounds of 50 concurrent requests to `path`, each handled in 10 ms (after `leadMillis` the app takes before
 * its handler starts): how many each round admitted. The
 * limiter starts at 4 (3 for `default` requests, with the shares) and grows while requests come back as fast as
 * the fastest it has seen.
 */
const rounds = <E, R>(app: HttpApp.Default<E, R>, path: string, ran: () => number, leadMillis = 0) =>
  Effect.gen(function*() {
    const admitted: Array<number> = []
    for (let round = 0; round < 6; round++) {
      const before = ran()
      const fibers = yield* Effect.forEach(
        Array.from({ length: 50 }, (_, i) => i),
        (i) => Effect.fork(Effect.either(call(app, requestTo(path, { key: `round-${round}-${i}` })))),
        { concurrency: "unbounded" }
      )
      if (leadMillis > 0) {
        yield* untilQuiet(fibers, (yield* TestClock.currentTimeMillis) + leadMillis)
        yield* TestClock.adjust(leadMillis)
      }
      yield* untilQuiet(fibers, (yield* TestClock.currentTimeMillis) + 10)
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
    Effect.zipRight(Effect.sleep("10 millis")),
    Effect.as(HttpServerResponse.unsafeJson({ ok: true }, { status: 201 }))
  )
  return { handler, ran: () => ran }
}

/** Runs `run` without and with the answers that must teach the limiter nothing: the rounds must not differ. */
const compare = <E>(run: (spoiled: boolean) => Effect.Effect<ReadonlyArray<number>, E>) =>
  Effect.gen(function*() {
    const unspoiled = yield* run(false)
    // the limit grows while nothing queues (the windowed Vegas default moves once per window of calls)
    expect(unspoiled[5]).toBeGreaterThan(unspoiled[0]!)
    expect(yield* run(true)).toEqual(unspoiled)
  })

describe("LoadShedMiddleware sampling", () => {
  it.effect("a handler that fails is no sample: one fast failure does not pin the limit", () =>
    compare((withFailure) =>
      Effect.scoped(Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make()
        const work = tenMillis()
        const app = shed(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          request.url.startsWith("/fail")
            ? Effect.zipRight(Effect.sleep("1 millis"), Effect.fail("the handler failed" as const))
            : work.handler))
        if (withFailure) {
          const failed = yield* Effect.fork(Effect.flip(call(app, requestTo("/fail"))))
          yield* settle
          yield* TestClock.adjust("1 millis")
          // the app's failure still reaches the server as it was
          expect(yield* Fiber.join(failed)).toBe("the handler failed")
        }
        return yield* rounds(app, "/work", work.ran)
      }))
    ))

  it.effect("answers given without the work — a missing key, 409, 422, a replay, an inner 429 — are no samples", () =>
    compare((withFastAnswers) =>
      Effect.scoped(Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make()
        const scope = () => Effect.succeed("one client")
        const idempotent = yield* IdempotencyMiddleware.make({ scope })
        const quota = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 0.001 })
        const order = tenMillis()
        const router = HttpRouter.empty.pipe(
          HttpRouter.post("/orders", order.handler.pipe(idempotent)),
          HttpRouter.post("/limited", order.handler.pipe(RateLimitMiddleware.make({ limiter: quota, scope })))
        )
        // a millisecond of network or parsing before anything answers: every answer takes some time
        const app = shed(Effect.zipRight(Effect.sleep("1 millis"), router))
        /** Sends `request` and waits past the millisecond before anything answers it. */
        const start = (request: HttpServerRequest.HttpServerRequest) =>
          Effect.gen(function*() {
            const fiber = yield* Effect.fork(call(app, request))
            yield* untilQuiet([fiber], (yield* TestClock.currentTimeMillis) + 1)
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
        // Both runs do the same work first: an order with key "k" and the quota's one token, two samples of 11 ms
        // (a windowed limiter counts every sample, so the control must have them too). Only the spoiled run gets,
        // meanwhile, the answers given in 1 ms without the work.
        const first = yield* start(requestTo("/orders", { key: "k" }))
        yield* untilQuiet([first], (yield* TestClock.currentTimeMillis) + 10)
        // ten of most kinds (five 409s fit in the first order's 10 ms): enough to fill a window, were they samples
        // a request's body can be read once: a new request each time
        const times = (n: number) => <A, E2, R2>(effect: () => Effect.Effect<A, E2, R2>) =>
          Effect.replicateEffect(Effect.suspend(effect), n)
        const tenTimes = times(10)
        if (withFastAnswers) {
          expect(yield* times(5)(() => status(requestTo("/orders", { key: "k" })))).toEqual(Array(5).fill(409)) // in progress
        }
        yield* TestClock.adjust("10 millis")
        expect((yield* Fiber.join(first)).status).toBe(201)
        if (withFastAnswers) {
          expect(yield* tenTimes(() => status(requestTo("/orders")))).toEqual(Array(10).fill(400)) // no key
          expect(yield* tenTimes(() => status(requestTo("/orders", { key: "k", body: "{\"other\":1}" })))).toEqual(
            Array(10).fill(422)
          )
          for (const replayed of yield* tenTimes(() => answer(requestTo("/orders", { key: "k" })))) {
            expect(replayed.status).toBe(201)
            expect(replayed.headers[IdempotencyMiddleware.replayedHeader]).toBe("true")
          }
        }
        const limited = yield* start(requestTo("/limited"))
        yield* untilQuiet([limited], (yield* TestClock.currentTimeMillis) + 10)
        if (withFastAnswers) expect(yield* tenTimes(() => status(requestTo("/limited")))).toEqual(Array(10).fill(429))
        yield* TestClock.adjust("10 millis")
        expect((yield* Fiber.join(limited)).status).toBe(201)
        expect(order.ran()).toBe(2)
        return yield* rounds(app, "/orders", order.ran, 1)
      })).pipe(Effect.provide(Layer.merge(IdempotencyStore.layerMemory, RateLimiterStore.layerMemory)))
    ))

  it.effect("a deadline's 504 inside the middleware is no sample: a client's short deadline teaches nothing", () =>
    compare((withShortDeadline) =>
      Effect.scoped(Effect.gen(function*() {
        const shed = yield* LoadShedMiddleware.make()
        const work = tenMillis()
        const app = shed(DeadlineMiddleware.make()(work.handler))
        if (withShortDeadline) {
          const cut = yield* Effect.fork(call(app, requestTo("/work", { headers: { "request-timeout-ms": "1" } })))
          yield* settle
          yield* TestClock.adjust("1 millis")
          expect((yield* Fiber.join(cut)).status).toBe(504)
          yield* TestClock.adjust("10 millis")
        }
        return yield* rounds(app, "/work", work.ran)
      }))
    ))
})
