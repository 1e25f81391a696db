/**
 * Issue 33's metrics (Effect 4 only): each exists with its labels and moves on the decision it counts. Values are
 * read from `Metric.snapshot` by their Prometheus names, as docs/observability.md lists them, and compared before
 * and after the decision, so series other tests share do not matter. Time is the TestClock's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Metric, Schedule } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse, HttpServerRequest, HttpServerResponse } from "effect/http"
import { TestClock } from "effect/testing"
import {
  AdaptiveLimiter,
  Bulkhead,
  Consumer,
  IdempotencyMiddleware,
  IdempotencyStore,
  LoadShedMiddleware,
  QueueSource,
  RateLimiter,
  RateLimiterStore,
  RateLimitMiddleware,
  ResilientHttpClient
} from "../src/index.js"
import { serve } from "./support/memoryServer.js"

type Labels = Readonly<Record<string, string>>

const matches = (attributes: Labels | undefined, labels: Labels) =>
  Object.entries(labels).every(([k, v]) => attributes?.[k] === v)

/** The sum of every counter series `id` whose attributes include `labels` (0 when there is none). */
const counted = (id: string, labels: Labels = {}) =>
  Effect.map(Metric.snapshot, (all) => {
    let total = 0
    for (const s of all) {
      if (s.id !== id || !matches(s.attributes as Labels | undefined, labels)) continue
      total += Number((s.state as { readonly count: number | bigint }).count)
    }
    return total
  })

/** Every histogram series `id` whose attributes include `labels`: their attributes, sample count and sum. */
const histogram = (id: string, labels: Labels = {}) =>
  Effect.map(
    Metric.snapshot,
    (all) =>
      all.filter((s) => s.id === id && matches(s.attributes as Labels | undefined, labels)).map((s) => ({
        attributes: s.attributes as Labels,
        ...(s.state as { readonly count: number; readonly sum: number })
      }))
  )

const samples = (id: string, labels: Labels = {}) =>
  Effect.map(histogram(id, labels), (series) => series.reduce((n, s) => n + s.count, 0))

const seconds = (id: string, labels: Labels = {}) =>
  Effect.map(histogram(id, labels), (series) => series.reduce((n, s) => n + s.sum, 0))

/** A backend that answers with `statuses` in turn (the last one from then on), taking 50 ms of TestClock each. */
const backend = (statuses: ReadonlyArray<number>) => {
  let n = 0
  return HttpClient.make((request) =>
    Effect.sleep("50 millis").pipe(
      Effect.as(HttpClientResponse.fromWeb(
        request,
        new Response(null, { status: statuses[Math.min(n++, statuses.length - 1)]! })
      ))
    )
  )
}

/** Runs `effect` in a fiber and advances the TestClock until it ends. */
const runTimed = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    yield* TestClock.adjust("1 minute")
    return yield* Fiber.join(fiber)
  })

describe("ResilientHttpClient metrics", () => {
  it.effect("times each attempt (OpenTelemetry http.client.request.duration) and the whole request", () =>
    Effect.gen(function*() {
      const client = yield* ResilientHttpClient.make({
        name: "metrics-attempts",
        retry: { schedule: Schedule.spaced("200 millis"), maxAttempts: 3 }
      }).pipe(Effect.provideService(HttpClient.HttpClient, backend([503, 503, 200])))
      const labels = { client: "metrics-attempts", origin: "http://a.test" }
      const response = yield* runTimed(client.execute(HttpClientRequest.get("http://a.test/x")))
      expect(response.status).toBe(200)

      const attempts = yield* histogram("http_client_request_duration_seconds", labels)
      // two 503s (error.type is the status, as OpenTelemetry says) and one success (no error.type)
      const failed = attempts.find((s) => s.attributes["error.type"] === "503")
      expect(failed).toMatchObject({ count: 2, sum: 0.1 })
      expect(failed?.attributes).toMatchObject({ "http.request.method": "GET", "http.response.status_code": "503" })
      const ok = attempts.find((s) => s.attributes["error.type"] === undefined)
      expect(ok).toMatchObject({ count: 1, sum: 0.05 })
      expect(ok?.attributes["http.response.status_code"]).toBe("200")

      // the logical request: three attempts of 50 ms and two backoffs of 200 ms
      const operation = yield* histogram("effect_resilience_http_client_operation_duration_seconds", labels)
      expect(operation).toHaveLength(1)
      expect(operation[0]).toMatchObject({ count: 1, sum: 0.55 })

      // each backoff is a sample of the retry backoff histogram, under the same client and origin
      expect(yield* samples("effect_resilience_retry_backoff_seconds", labels)).toBe(2)
      expect(yield* seconds("effect_resilience_retry_backoff_seconds", labels)).toBeCloseTo(0.4)
    }))

  it.effect("labels a request that failed for good with its error.type", () =>
    Effect.gen(function*() {
      const client = yield* ResilientHttpClient.make({
        name: "metrics-giveup",
        retry: { schedule: Schedule.spaced("10 millis"), maxAttempts: 2 }
      }).pipe(Effect.provideService(HttpClient.HttpClient, backend([500])))
      const labels = { client: "metrics-giveup", origin: "http://b.test" }
      const exit = yield* runTimed(Effect.exit(client.execute(HttpClientRequest.get("http://b.test/"))))
      expect(exit._tag).toBe("Failure")
      const operation = yield* histogram("effect_resilience_http_client_operation_duration_seconds", labels)
      expect(operation.map((s) => s.attributes["error.type"])).toEqual(["RetriesExhausted"])
      expect(yield* samples("http_client_request_duration_seconds", { ...labels, "error.type": "500" })).toBe(2)
    }))

  it.effect("caps origin labels as the retry counters do: past maxOriginLabels, origin is other", () =>
    Effect.gen(function*() {
      const client = yield* ResilientHttpClient.make({ name: "metrics-cap", retry: { maxOriginLabels: 1 } }).pipe(
        Effect.provideService(HttpClient.HttpClient, backend([200]))
      )
      yield* runTimed(client.execute(HttpClientRequest.get("http://first.test/")))
      yield* runTimed(client.execute(HttpClientRequest.get("http://second.test/")))
      const all = yield* histogram("http_client_request_duration_seconds", { client: "metrics-cap" })
      expect(all.map((s) => s.attributes["origin"]).sort()).toEqual(["http://first.test", "other"])
    }))
})

describe("server middleware metrics", () => {
  it.effect("IdempotencyMiddleware counts new, replay, in_progress, mismatch, invalid and unkeyed", () =>
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
      const send = yield* serve(middleware(handler))
      const id = "effect_resilience_idempotency_requests_total"
      const before = yield* Effect.forEach(
        ["new", "replay", "in_progress", "mismatch", "invalid", "unkeyed"],
        (outcome) => counted(id, { outcome })
      )
      const delta = Effect.flatMap(
        Effect.forEach(
          ["new", "replay", "in_progress", "mismatch", "invalid", "unkeyed"],
          (o) => counted(id, { outcome: o })
        ),
        (after) => Effect.succeed(after.map((n, i) => n - before[i]!))
      )

      expect((yield* send({ key: "\"k1\"", body: { a: 1 } })).status).toBe(201) // new
      expect((yield* send({ key: "\"k1\"", body: { a: 1 } })).status).toBe(201) // replay
      expect((yield* send({ key: "\"k1\"", body: { a: 2 } })).status).toBe(422) // mismatch
      expect((yield* send({ key: "not a string", body: { a: 1 } })).status).toBe(400) // invalid
      expect((yield* send({ method: "POST", body: { a: 1 } })).status).toBe(201) // unkeyed
      const slow = yield* Effect.forkChild(send({ key: "\"k2\"", path: "/slow", body: {} })) // new
      yield* Effect.repeat(Effect.yieldNow, { times: 20 })
      expect((yield* send({ key: "\"k2\"", path: "/slow", body: {} })).status).toBe(409) // in_progress
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(slow)
      expect(yield* delta).toEqual([2, 1, 1, 1, 1, 1])
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory)))

  it.effect("RateLimitMiddleware counts allowed and denied per limiter name", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 1 })
      const middleware = RateLimitMiddleware.make({ limiter, name: "metrics-orders" })
      const send = yield* serve(middleware(Effect.succeed(HttpServerResponse.text("ok"))))
      const id = "effect_resilience_rate_limit_requests_total"
      const allowed = yield* counted(id, { limiter: "metrics-orders", decision: "allowed" })
      const denied = yield* counted(id, { limiter: "metrics-orders", decision: "denied" })
      expect((yield* send()).status).toBe(200)
      expect((yield* send()).status).toBe(429)
      expect(yield* counted(id, { limiter: "metrics-orders", decision: "allowed" })).toBe(allowed + 1)
      expect(yield* counted(id, { limiter: "metrics-orders", decision: "denied" })).toBe(denied + 1)
      yield* TestClock.adjust("1 second")
      expect((yield* send()).status).toBe(200)
      expect(yield* counted(id, { limiter: "metrics-orders", decision: "allowed" })).toBe(allowed + 2)
    }).pipe(Effect.scoped, Effect.provide(RateLimiterStore.layerMemory)))

  it.effect("LoadShedMiddleware counts admissions and refusals by criticality", () =>
    Effect.gen(function*() {
      const fixed = { algorithm: AdaptiveLimiter.aimd(), minLimit: 1, maxLimit: 1, name: "metrics-shed" }
      const shed = yield* LoadShedMiddleware.make({ limiter: fixed })
      const gate = yield* Deferred.make<void>()
      const send = yield* serve(shed(Effect.as(Deferred.await(gate), HttpServerResponse.text("ok"))))
      const id = "effect_resilience_load_shed_requests_total"
      const of = (criticality: string, decision: string) =>
        counted(id, { limiter: "metrics-shed", criticality, decision })
      const admitted = yield* of("default", "admitted")
      const refusedBefore = yield* counted(id, { limiter: "metrics-shed", criticality: "sheddable" })
      const held = yield* Effect.forkChild(send())
      yield* Effect.repeat(Effect.yieldNow, { times: 20 })
      const refused = yield* send({ headers: { "request-criticality": "sheddable" } })
      expect(refused.status).toBe(503)
      expect(yield* of("default", "admitted")).toBe(admitted + 1)
      expect(yield* counted(id, { limiter: "metrics-shed", criticality: "sheddable" })).toBe(refusedBefore + 1)
      expect(yield* of("sheddable", "admitted")).toBe(0)
      yield* Deferred.succeed(gate, undefined)
      expect((yield* Fiber.join(held)).status).toBe(200)
    }).pipe(Effect.scoped))
})

describe("series that exist before their first event", () => {
  it.effect("the middlewares' refusal series are at 0 before any refusal, so PromQL ratios return a series", () =>
    Effect.gen(function*() {
      const exists = (id: string, labels: Labels) =>
        Effect.map(Metric.snapshot, (all) => all.some((s) => s.id === id && matches(s.attributes as Labels, labels)))
      yield* IdempotencyMiddleware.make({})
      expect(yield* exists("effect_resilience_idempotency_requests_total", { outcome: "store_error" })).toBe(true)
      yield* LoadShedMiddleware.make({ limiter: { name: "metrics-init" } })
      const shed = { limiter: "metrics-init", criticality: "sheddable", decision: "shed" }
      expect(yield* exists("effect_resilience_load_shed_requests_total", shed)).toBe(true)
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 5, refillPerSecond: 1 })
      const send = yield* serve(
        RateLimitMiddleware.make({ limiter, name: "metrics-init" })(Effect.succeed(HttpServerResponse.text("ok")))
      )
      const denied = { limiter: "metrics-init", decision: "denied" }
      expect(yield* exists("effect_resilience_rate_limit_requests_total", denied)).toBe(false)
      expect((yield* send()).status).toBe(200) // allowed: the denied series appears, at 0
      expect(yield* exists("effect_resilience_rate_limit_requests_total", denied)).toBe(true)
      expect(yield* counted("effect_resilience_rate_limit_requests_total", denied)).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(IdempotencyStore.layerMemory), Effect.provide(RateLimiterStore.layerMemory)))
})

describe("queue wait histograms", () => {
  it.effect("Bulkhead: a call that queued records its wait, labelled bulkhead", () =>
    Effect.gen(function*() {
      const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 1, name: "metrics-bulkhead" })
      const id = "effect_resilience_bulkhead_queue_wait_seconds"
      const first = yield* Effect.forkChild(bulkhead.protect(Effect.sleep("300 millis")))
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      const second = yield* Effect.forkChild(bulkhead.protect(Effect.void))
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      expect(yield* samples(id, { bulkhead: "metrics-bulkhead" })).toBe(0) // the first ran at once
      yield* TestClock.adjust("300 millis")
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      expect(yield* samples(id, { bulkhead: "metrics-bulkhead" })).toBe(1)
      expect(yield* seconds(id, { bulkhead: "metrics-bulkhead" })).toBeCloseTo(0.3)
    }))

  it.effect("AdaptiveLimiter: a call that queued records its wait, labelled limiter", () =>
    Effect.gen(function*() {
      const limiter = yield* AdaptiveLimiter.make({
        algorithm: AdaptiveLimiter.aimd(),
        minLimit: 1,
        maxLimit: 1,
        maxQueue: 1,
        name: "metrics-limiter"
      })
      const id = "effect_resilience_adaptive_limiter_queue_wait_seconds"
      const first = yield* Effect.forkChild(limiter.protect(Effect.sleep("200 millis")))
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      const second = yield* Effect.forkChild(limiter.protect(Effect.void))
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      yield* TestClock.adjust("200 millis")
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      expect(yield* samples(id, { limiter: "metrics-limiter" })).toBe(1)
      expect(yield* seconds(id, { limiter: "metrics-limiter" })).toBeCloseTo(0.2)
    }))

  it.effect("RateLimiter.acquire: a wait for permits is recorded, labelled limiter and algorithm", () =>
    Effect.gen(function*() {
      const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 2, name: "metrics-rate" })
      const id = "effect_resilience_rate_limiter_wait_seconds"
      const labels = { limiter: "metrics-rate", algorithm: "token-bucket" }
      yield* limiter.acquire("k") // no wait: no sample
      expect(yield* samples(id, labels)).toBe(0)
      const waiting = yield* Effect.forkChild(limiter.acquire("k"))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(waiting)
      expect(yield* samples(id, labels)).toBe(1)
      expect(yield* seconds(id, labels)).toBeCloseTo(0.5)
    }).pipe(Effect.provide(RateLimiterStore.layerMemory)))
})

/** Steps the TestClock until `done` holds (bounded). */
const until = (done: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2_000; i++) {
      yield* Effect.repeat(Effect.yieldNow, { times: 10 })
      if (yield* done) return
      yield* TestClock.adjust("10 millis")
    }
    throw new Error("condition never held")
  })

describe("queue metrics", () => {
  it.effect("counts received, visibility extensions, dead letters and redrives per queue", () =>
    Effect.gen(function*() {
      const source = yield* QueueSource.memory<{ readonly fail: boolean }>({
        name: "metrics-queue",
        visibilityTimeout: "1 second"
      })
      const q = { queue: "metrics-queue" }
      yield* source.send([{ id: "slow", body: { fail: false } }, { id: "poison", body: { fail: true } }])
      const consumer = yield* Consumer.run({
        source,
        handler: (m) => m.body.fail ? Effect.fail("bad") : Effect.sleep("2 seconds"),
        concurrency: 2,
        maxReceiveCount: 2,
        timeout: "10 seconds"
      })
      yield* until(Effect.map(consumer.stats, (s) => s.processed === 1 && s.deadLettered === 1))
      const stats = yield* consumer.stats
      expect(yield* counted("effect_resilience_queue_received_total", q)).toBe(stats.received)
      expect(stats.received).toBe(3) // slow once, poison twice
      expect(yield* counted("effect_resilience_queue_visibility_extended_total", q)).toBe(stats.extended)
      expect(stats.extended).toBeGreaterThan(0)
      expect(yield* counted("effect_resilience_queue_dead_lettered_total", q)).toBe(1)
      expect(yield* counted("effect_resilience_queue_redriven_total", q)).toBe(0)
      expect(yield* source.deadLetters!.redrive()).toBe(1)
      expect(yield* counted("effect_resilience_queue_redriven_total", q)).toBe(1)
    }).pipe(Effect.scoped))
})
