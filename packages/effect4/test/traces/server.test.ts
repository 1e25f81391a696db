/**
 * Issue 33's traces of the server middlewares and the queue consumer (Effect 4 only): each middleware says its
 * decision on the request's span (here a span `request` around the app, as a server's tracing middleware makes
 * one); a delivery's `queue.handle` span carries its attempt, its visibility renewals and its fate as events.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import {
  AdaptiveLimiter,
  Consumer,
  DeadlineMiddleware,
  Failure,
  IdempotencyMiddleware,
  IdempotencyStore,
  LoadShedMiddleware,
  QueueSource,
  RateLimiter,
  RateLimiterStore,
  RateLimitMiddleware
} from "../../src/index.js"
import { serve } from "../support/memoryServer.js"
import { eventsOf, named, recorder } from "./support.js"

type App = Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, HttpServerRequest.HttpServerRequest>

/** A server whose every request runs in a span `request` of a recording tracer; the spans, in order. */
const tracedServer = (app: App) =>
  Effect.gen(function*() {
    const recorded = recorder()
    const send = yield* serve(Effect.withSpan(app, "request")).pipe(Effect.withTracer(recorded.tracer))
    return { send, requests: () => named(recorded, "request") }
  })

const attributesOf = (span: { readonly attributes: ReadonlyMap<string, unknown> }, prefix: string) =>
  Object.fromEntries([...span.attributes].filter(([key]) => key.startsWith(prefix)))

describe("server middleware traces", () => {
  it.effect("IdempotencyMiddleware: the outcome of each request (new, replay, 409, 422, 400) on its span", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const middleware = yield* IdempotencyMiddleware.make({ required: false })
      const handler = Effect.flatMap(
        HttpServerRequest.HttpServerRequest,
        (request) =>
          request.url.includes("slow")
            ? Effect.as(Deferred.await(gate), HttpServerResponse.text("late", { status: 201 }))
            : Effect.succeed(HttpServerResponse.text("made", { status: 201 }))
      )
      const { requests, send } = yield* tracedServer(middleware(handler))
      expect((yield* send({ key: "\"t1\"", body: { a: 1 } })).status).toBe(201)
      expect((yield* send({ key: "\"t1\"", body: { a: 1 } })).status).toBe(201)
      expect((yield* send({ key: "\"t1\"", body: { a: 2 } })).status).toBe(422)
      expect((yield* send({ key: "not a string", body: { a: 1 } })).status).toBe(400)
      const slow = yield* Effect.forkChild(send({ key: "\"t2\"", path: "/slow", body: {} }))
      yield* Effect.repeat(Effect.yieldNow, { times: 20 })
      expect((yield* send({ key: "\"t2\"", path: "/slow", body: {} })).status).toBe(409)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(slow)
      // in the order the requests started: the slow one (new) before its 409
      expect(requests().map((s) => s.attributes.get("idempotency.outcome"))).toEqual([
        "new",
        "replay",
        "mismatch",
        "invalid",
        "new",
        "in_progress"
      ])
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("RateLimitMiddleware: the decision and the quota left on the request's span", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 2, refillPerSecond: 1 })
      const { requests, send } = yield* tracedServer(
        RateLimitMiddleware.make({ limiter, name: "traces-orders" })(Effect.succeed(HttpServerResponse.text("ok")))
      )
      expect((yield* send()).status).toBe(200)
      expect((yield* send()).status).toBe(200)
      expect((yield* send()).status).toBe(429)
      expect(requests().map((s) => attributesOf(s, "rate_limit."))).toEqual([
        {
          "rate_limit.name": "traces-orders",
          "rate_limit.decision": "allowed",
          "rate_limit.remaining": 1,
          "rate_limit.retry_after_ms": 0
        },
        {
          "rate_limit.name": "traces-orders",
          "rate_limit.decision": "allowed",
          "rate_limit.remaining": 0,
          "rate_limit.retry_after_ms": 0
        },
        {
          "rate_limit.name": "traces-orders",
          "rate_limit.decision": "denied",
          "rate_limit.remaining": 0,
          "rate_limit.retry_after_ms": 1000
        }
      ])
    }).pipe(Effect.scoped, Effect.provide(RateLimiterStore.layerMemory)))

  it.effect("LoadShedMiddleware: the criticality and the admission or the refusal on the request's span", () =>
    Effect.gen(function*() {
      const fixed = { algorithm: AdaptiveLimiter.aimd(), minLimit: 1, maxLimit: 1, name: "traces-shed" }
      const shed = yield* LoadShedMiddleware.make({ limiter: fixed })
      const gate = yield* Deferred.make<void>()
      const { requests, send } = yield* tracedServer(
        shed(Effect.as(Deferred.await(gate), HttpServerResponse.text("ok")))
      )
      const held = yield* Effect.forkChild(send())
      yield* Effect.repeat(Effect.yieldNow, { times: 20 })
      expect((yield* send({ headers: { "request-criticality": "sheddable" } })).status).toBe(503)
      yield* Deferred.succeed(gate, undefined)
      expect((yield* Fiber.join(held)).status).toBe(200)
      expect(requests().map((s) => attributesOf(s, "load_shed."))).toEqual([
        { "load_shed.criticality": "default", "load_shed.decision": "admitted" },
        { "load_shed.criticality": "sheddable", "load_shed.decision": "shed" }
      ])
      // the limiter's own attribute and event name the refusal on the same span
      expect(requests()[1]!.attributes.get("adaptive_limiter.rejected")).toBe("shed")
      expect(eventsOf(requests()[1]!)).toEqual([
        { name: "AdaptiveLimiter.rejected", attributes: { limiter: "traces-shed", reason: "shed" } }
      ])
    }).pipe(Effect.scoped))

  it.effect("DeadlineMiddleware: the deadline the request asked and the time it was given", () =>
    Effect.gen(function*() {
      const { requests, send } = yield* tracedServer(
        DeadlineMiddleware.make({ maxTimeout: "2 seconds" })(Effect.succeed(HttpServerResponse.text("ok")))
      )
      yield* send({ headers: { "request-timeout-ms": "5000" } })
      yield* send({ headers: { "request-timeout-ms": "soon" } })
      const [asked, malformed] = requests()
      expect(attributesOf(asked!, "deadline.")).toEqual({ "deadline.header_ms": 5000, "deadline.remaining_ms": 2000 })
      expect(attributesOf(malformed!, "deadline.")).toMatchObject({ "deadline.header_invalid": true })
    }).pipe(Effect.scoped))
})

/** Advances the TestClock in steps until `done` holds. */
const until = (done: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 10_000; i++) {
      yield* Effect.repeat(Effect.yieldNow, { times: 50 })
      if (yield* done) return
      yield* TestClock.adjust("10 millis")
    }
    throw new Error("condition never held")
  })

describe("queue traces", () => {
  it.effect("a span per delivery with its attempt, its visibility renewals and its fate as events", () =>
    Effect.gen(function*() {
      const recorded = recorder()
      const source = yield* QueueSource.memory<{ readonly kind: "slow" | "flaky" | "fatal" }>({
        name: "traces-queue",
        visibilityTimeout: "1 second"
      })
      yield* source.send([
        { id: "slow", body: { kind: "slow" } },
        { id: "flaky", body: { kind: "flaky" } },
        { id: "fatal", body: { kind: "fatal" } }
      ])
      const consumer = yield* Consumer.run({
        source,
        handler: (m): Effect.Effect<void, unknown> =>
          m.body.kind === "slow"
            ? Effect.sleep("2500 millis")
            : m.body.kind === "fatal"
            ? Effect.fail(Failure.fatal("no"))
            : Effect.fail("again"),
        concurrency: 3,
        maxReceiveCount: 2,
        timeout: "10 seconds"
      }).pipe(Effect.withTracer(recorded.tracer))
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 1 && s.deadLettered === 2))
      const deliveries = named(recorded, "queue.handle")
      const of = (id: string) => deliveries.filter((s) => s.attributes.get("message.id") === id)
      expect(of("flaky").map((s) => s.attributes.get("message.receive_count"))).toEqual([1, 2])
      expect(of("flaky").map((s) => eventsOf(s))).toEqual([
        [{ name: "queue.release", attributes: { "message.receive_count": 1 } }],
        [{ name: "queue.dead_letter", attributes: { "message.receive_count": 2, reason: "max-receives" } }]
      ])
      expect(of("fatal").map((s) => eventsOf(s))).toEqual([
        [{ name: "queue.dead_letter", attributes: { "message.receive_count": 1, reason: "fatal" } }]
      ])
      const [slow] = of("slow")
      const extended = eventsOf(slow!).filter((e) => e.name === "queue.visibility_extended")
      expect(extended.length).toBe((yield* consumer.stats).extended)
      expect(extended.length).toBeGreaterThan(0)
      expect(eventsOf(slow!).every((e) => e.name === "queue.visibility_extended")).toBe(true)
    }).pipe(Effect.scoped))
})
