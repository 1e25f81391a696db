import {
  fork,
  gaugeValue,
  handClock,
  HttpServerRequest,
  HttpServerResponse,
  jsonResponse,
  provideClock,
  scoped,
  yieldNow
} from "#edition"
import { describe, expect } from "@effect/vitest"
import { Effect, Fiber, Queue } from "effect"
import {
  AdaptiveLimiter,
  DeadlineMiddleware,
  IdempotencyMiddleware,
  IdempotencyStore,
  LoadShedMiddleware
} from "effect-resilience"

// Clients that stop waiting must not bypass shedding: a handler the idempotency middleware runs to its end after
// its client left keeps its load-shed slot until it ends.

/** Lets forked fibers run until they block, web request bodies included (read through promises). */
const settle = Effect.andThen(
  Effect.repeat(yieldNow, { times: 20 }),
  Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
)

/** Virtual time moved by hand (TestClock's `adjust` costs real milliseconds per sleeper woken). */
const withHandClock = <A, E, R>(f: (advance: (millis: number) => Effect.Effect<void>) => Effect.Effect<A, E, R>) =>
  Effect.suspend(() => {
    const hand = handClock()
    return provideClock(hand.clock)(f((millis) => Effect.andThen(hand.advance(millis), settle)))
  })

const order = (key: string, headers: Record<string, string> = {}) =>
  HttpServerRequest.fromWeb(
    new Request("http://127.0.0.1/orders", {
      method: "POST",
      body: "{\"sku\":\"A\"}",
      headers: { "idempotency-key": key, "content-type": "application/json", ...headers }
    })
  )

const call = <E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  request: HttpServerRequest.HttpServerRequest
) => Effect.provideService(app, HttpServerRequest.HttpServerRequest, request)

const limit = 4

/**
 * The orders service of examples/orders.ts in small: creating an order takes one of `limit` slots of a resource
 * for 20 ms, waiting in line for one otherwise; counts the handlers inside (waiting or working), the most at once,
 * and the orders made.
 */
const makeService = (name: string, deadlineInside: boolean) =>
  Effect.gen(function*() {
    const shed = yield* LoadShedMiddleware.make({
      limiter: { algorithm: AdaptiveLimiter.aimd(), minLimit: limit, maxLimit: limit, name },
      trustCritical: true
    })
    const idempotent = yield* IdempotencyMiddleware.make({ scope: () => Effect.succeed("client") })
    // `limit` permits, taken in turn
    const permits = yield* Queue.bounded<void>(limit)
    yield* Effect.forEach(Array.from({ length: limit }), () => Queue.offer(permits, undefined))
    const counts = { inside: 0, most: 0, made: 0 }
    const create = Effect.gen(function*() {
      counts.inside++
      counts.most = Math.max(counts.most, counts.inside)
      yield* Effect.acquireUseRelease(
        Queue.take(permits),
        () => Effect.sleep("20 millis"),
        () => Queue.offer(permits, undefined)
      )
      counts.inside--
      counts.made++
      return jsonResponse({ id: counts.made }, { status: 201 })
    })
    const deadline = DeadlineMiddleware.make()
    // the example puts the deadline outside (around the router); the architecture sketch inside
    const app = deadlineInside ? shed(deadline(idempotent(create))) : deadline(shed(idempotent(create)))
    return { app, counts, inflight: gaugeValue(AdaptiveLimiter.inflightGauge, { limiter: name }) }
  })

describe("LoadShedMiddleware and work nobody waits for", () => {
  for (const deadlineInside of [false, true]) {
    scoped(
      `16 lanes with Request-Timeout-Ms: 5 never run more handlers than the limit (deadline ${
        deadlineInside ? "inside" : "outside"
      })`,
      () =>
        withHandClock((advance) =>
          Effect.gen(function*() {
            const name = `detached-${deadlineInside ? "inside" : "outside"}`
            const { app, counts, inflight } = yield* makeService(name, deadlineInside)
            const answers = new Map<number, number>()
            let sent = 0
            const lane = Effect.forever(
              Effect.flatMap(
                Effect.suspend(() => call(app, order(`lane-${sent++}`, { "request-timeout-ms": "5" }))),
                (response) => Effect.sync(() => answers.set(response.status, (answers.get(response.status) ?? 0) + 1))
              ).pipe(Effect.andThen(Effect.sleep("1 millis"))) // the next one after a network round trip
            )
            const lanes = yield* Effect.forEach(Array.from({ length: 16 }), () => fork(lane))
            let mostInflight = 0
            yield* settle
            for (let ms = 0; ms < 300; ms++) {
              // every handler still inside holds its slot, whether or not its client still waits
              const held = yield* inflight
              expect(held).toBeGreaterThanOrEqual(counts.inside)
              mostInflight = Math.max(mostInflight, held)
              yield* advance(1)
            }
            yield* Fiber.interruptAll(lanes)
            // the clients gave up (504) on orders that were then made for nobody: the scenario happened
            expect(answers.get(504) ?? 0).toBeGreaterThan(0)
            expect(counts.made).toBeGreaterThan(0)
            expect(answers.get(503) ?? 0).toBeGreaterThan(0)
            expect(counts.most).toBeLessThanOrEqual(limit)
            expect(mostInflight).toBeLessThanOrEqual(limit)

            // and every slot comes back once the work ends
            for (let ms = 0; ms < 1000 && counts.inside > 0; ms += 10) yield* advance(10)
            expect(counts.inside).toBe(0)
            expect(yield* inflight).toBe(0)
          })
        ).pipe(Effect.provide(IdempotencyStore.layerMemory))
    )
  }

  scoped(
    "a detached handler's slot is given back when it ends",
    () =>
      withHandClock((advance) =>
        Effect.gen(function*() {
          const { app, counts, inflight } = yield* makeService("detached-one", false)
          const gone = yield* fork(call(app, order("leaves", { "request-timeout-ms": "5" })))
          yield* settle
          yield* advance(5)
          expect((yield* Fiber.join(gone)).status).toBe(504)
          expect(counts.inside).toBe(1) // still making the order, for nobody
          expect(yield* inflight).toBe(1)
          yield* advance(15)
          expect(counts.made).toBe(1)
          expect(yield* inflight).toBe(0)
        })
      ).pipe(Effect.provide(IdempotencyStore.layerMemory))
  )
})
