/**
 * One run of the duplicate-order story: an orders service on 127.0.0.1 behind an unreliable network, and
 * a batch of logical orders placed by concurrent clients — naively or with this library. Client `c` places
 * orders `c`, `c + clients`, `c + 2 × clients`, … one after the other, so which client sends which request
 * does not depend on timing, and neither does the fault each attempt meets (see faults.ts).
 */
import { HttpClient, HttpClientRequest, type HttpClientResponse, HttpServer } from "@effect/platform"
import { NodeHttpClient, NodeHttpServer } from "@effect/platform-node"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Duration, Effect, Layer, Metric, Option, Random } from "effect"
import { Backoff, CircuitBreaker, Deadline, RateLimiterStore, ResilientHttpClient, RetryAfter } from "effect-resilience"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assignOrders } from "../../../../examples/demo/pattern.js"
import { type Counters, type Outcome, summarize, type Summary } from "../../../../examples/demo/summary.js"
import { makeOrdersApp, type Order } from "../orders.js"
import { forOrder, network, numberAttempts, readTimeoutMillis } from "./faults.js"
import { deadlineSeconds, describe, status } from "./report.js"

export { assignOrders, orderRef } from "../../../../examples/demo/pattern.js"
export type { Summary } from "../../../../examples/demo/summary.js"

export type Kind = "naive" | "resilient"

export interface Settings {
  readonly seed: number
  readonly orders: number
  readonly clients: number
  readonly onProgress: (done: number) => void
}

const service = { capacity: 20, refillPerSecond: 40 } // some 429s from the real limiter at 10 to 20 clients

/** Timer granularity: a wait measured 1 ms short of the Retry-After it honoured still honoured it. */
const clockSlackMillis = 5

/**
 * Counts what crosses the wire, below any retry logic — including whether the next attempt of an order
 * that got a 429 waited for its Retry-After.
 */
const counting = (counters: Counters) => (client: HttpClient.HttpClient): HttpClient.HttpClient => {
  const pending429 = new Map<string, number>() // order → earliest time its next attempt honours Retry-After
  return client.pipe(
    HttpClient.tapRequest((request) =>
      Effect.gen(function*() {
        counters.attempts++
        const order = request.headers["x-demo-order"] ?? ""
        const earliest = pending429.get(order)
        if (earliest === undefined) return
        pending429.delete(order)
        if ((yield* Clock.currentTimeMillis) >= earliest - clockSlackMillis) counters.honoured429++
      })
    ),
    HttpClient.tap((response: HttpClientResponse.HttpClientResponse) =>
      Effect.gen(function*() {
        if (response.headers["idempotent-replayed"] === "true") counters.replays++
        if (response.status !== 429) return
        counters.status429++
        const now = yield* Clock.currentTimeMillis
        const header = response.headers["retry-after"]
        const wait = header === undefined ? Option.none() : RetryAfter.parse(header, now)
        const waitMs = Option.match(wait, { onNone: () => 0, onSome: Duration.toMillis })
        pending429.set(response.request.headers["x-demo-order"] ?? "", now + waitMs)
      })
    )
  )
}

const orderRequest = (url: string, client: number, ref: string) =>
  HttpClientRequest.post(url).pipe(
    HttpClientRequest.bodyUnsafeJson({ ref, sku: "BOOK-1", qty: 1 }),
    forOrder(client, ref)
  )

const naiveAttempts = 4

/** What many clients do: retry anything that went wrong, a few times, quickly. No key, no deadline. */
const naiveOrder = (http: HttpClient.HttpClient, url: string, client: number, ref: string): Effect.Effect<Outcome> =>
  Effect.gen(function*() {
    let reason = "no attempt"
    for (let attempt = 1; attempt <= naiveAttempts; attempt++) {
      const result = yield* http.execute(orderRequest(url, client, ref)).pipe(
        Effect.flatMap((response) => Effect.map(response.json, (json) => ({ status: response.status, json }))),
        Effect.timeout(readTimeoutMillis),
        Effect.either
      )
      if (result._tag === "Right" && result.right.status === 201) {
        return { created: true, order: result.right.json as Order }
      }
      const last = result._tag === "Left" ? describe(result.left) : status(result.right.status)
      if (result._tag === "Right" && result.right.status < 500 && result.right.status !== 429) {
        return { created: false, reason: `${last}; not retried` }
      }
      reason = `${last}; gave up after ${naiveAttempts} attempts`
      yield* Effect.sleep("100 millis")
    }
    return { created: false, reason }
  })

interface Answer {
  readonly status: number
  readonly json: unknown
}

/**
 * The same intent with the library: one Idempotency-Key per order, deadline, jitter, budget, breaker. A 409 "still
 * in progress" for the order's key is the client's to wait out, after its Retry-After.
 */
const resilientOrder = (
  http: ResilientHttpClient.ResilientHttpClient,
  url: string,
  client: number,
  ref: string
): Effect.Effect<Outcome> =>
  http.execute(orderRequest(url, client, ref)).pipe(
    Effect.flatMap((response) => Effect.map(response.json, (json): Answer => ({ status: response.status, json }))),
    Deadline.within(`${deadlineSeconds} seconds`),
    Effect.map((r): Outcome =>
      r.status === 201 ? { created: true, order: r.json as Order } : { created: false, reason: status(r.status) }
    ),
    Effect.catchAll((error) => Effect.succeed<Outcome>({ created: false, reason: describe(error) }))
  )

const openingsSoFar = Effect.map(Metric.snapshot, (pairs) => {
  let total = 0
  for (const pair of pairs) {
    if (pair.metricKey.name !== "effect_resilience_breaker_transitions_total") continue
    if (!pair.metricKey.tags.some((t) => t.key === "to" && t.value === "open")) continue
    const state = pair.metricState as unknown as { count?: number | bigint }
    total += Number(state.count ?? 0)
  }
  return total
})

export const run = (kind: Kind, settings: Settings): Effect.Effect<Summary, unknown> =>
  Effect.gen(function*() {
    const net = network(settings.seed)
    const { app, created } = yield* makeOrdersApp({
      rate: service,
      idempotency: { required: false, lease: "10 seconds" }, // the naive client sends no key at all
      network: net.middleware
    })
    yield* HttpServer.serveEffect(app)
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    const url = `http://127.0.0.1:${port}/orders`

    const counters: Counters = { attempts: 0, replays: 0, status429: 0, honoured429: 0 }
    const wire = counting(counters)(numberAttempts(yield* HttpClient.HttpClient))
    const openingsBefore = yield* openingsSoFar

    const place: (client: number, ref: string) => Effect.Effect<Outcome> = kind === "naive"
      ? (client, ref) => naiveOrder(wire, url, client, ref)
      : yield* Effect.map(
        ResilientHttpClient.make({
          attemptTimeout: readTimeoutMillis,
          retry: {
            schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }),
            maxAttempts: 8,
            budget: { maxTokens: 100, tokenRatio: 0.5 } // one budget for every order this client places
          },
          breaker: {
            trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { duration: "5 seconds" } }),
            openFor: "1 second"
          }
        }).pipe(Effect.provideService(HttpClient.HttpClient, wire)),
        (http) => (client: number, ref: string) => resilientOrder(http, url, client, ref)
      )

    const start = yield* Clock.currentTimeMillis
    let done = 0
    const perClient = assignOrders(settings.orders, settings.clients)
    const outcomes = new Map<string, Outcome>()
    yield* Effect.forEach(
      perClient,
      (refs, client) =>
        Effect.forEach(refs, (ref) =>
          Effect.map(place(client, ref), (outcome) => {
            outcomes.set(ref, outcome)
            settings.onProgress(++done)
          }), { discard: true }),
      { concurrency: "unbounded", discard: true }
    )
    const wallMs = (yield* Clock.currentTimeMillis) - start

    return summarize({
      settings,
      counters,
      outcomes,
      created: created(),
      breakerOpenings: (yield* openingsSoFar) - openingsBefore,
      injected: net.injected(),
      wallMs
    })
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.mergeAll(
      NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }),
      NodeHttpClient.layerUndici,
      RateLimiterStore.layerMemory,
      sqliteStore
    )),
    // the resilient client's jitter draws from Random: seeded, so its delays repeat too
    Effect.withRandom(Random.make(`${kind}-${settings.seed}`))
  )

/** The embedded default: the idempotency table in a SQLite file in a temporary directory. */
const sqliteStore = Layer.unwrapScoped(Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "effect-resilience-demo-"))),
    (path) => Effect.sync(() => rmSync(path, { recursive: true, force: true }))
  )
  return IdempotencyStoreSql.layer().pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, "idempotency.db") })))
}))
