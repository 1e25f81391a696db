/**
 * One run of the duplicate-order story: an orders service on 127.0.0.1 behind an unreliable network
 * (Chaos), and a batch of logical orders placed by concurrent clients — naively or with this library.
 */
import { HttpClient, HttpClientRequest, type HttpClientResponse, HttpServer } from "@effect/platform"
import { NodeHttpClient, NodeHttpServer } from "@effect/platform-node"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Effect, Layer, Metric, Random } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as IdempotencyStoreSql from "../../src/IdempotencyStore/Sql.js"
import {
  Backoff,
  CircuitBreaker,
  Deadline,
  Failure,
  RateLimiterStore,
  ResilientHttpClient,
  Retry,
  RetryBudget
} from "../../src/index.js"
import { makeOrdersApp, type Order } from "../orders.js"

export type Kind = "naive" | "resilient"

export interface Settings {
  readonly seed: number
  readonly orders: number
  readonly clients: number
  readonly onProgress: (done: number) => void
}

export interface Summary {
  readonly logical: number
  readonly attempts: number
  readonly retries: number
  readonly replays: number
  /** 429 answers received */
  readonly status429: number
  /** 429 answers whose Retry-After the client waited for (the naive client never does) */
  readonly honoured429: number
  readonly breakerOpenings: number
  /** orders in the service's database */
  readonly created: number
  readonly duplicates: number
  /** reported created to the caller, yet not in the database */
  readonly lost: number
  /** the caller was told the order failed */
  readonly gaveUp: number
  /** of those, how many exist anyway (the caller was told "failed", the order was placed) */
  readonly gaveUpButCreated: number
  readonly wallMs: number
  readonly gaveUpReasons: Readonly<Record<string, number>>
}

/** The unreliable network between clients and the service (the same for both runs). */
const faults = {
  lostResponse: { probability: 0.08 }, // the order is committed, the answer never arrives
  errorResponse: [{ probability: 0.05, status: 503, retryAfter: "1 second" }],
  latency: { probability: 0.04, delay: "1500 millis" } // longer than the clients' 1 s read timeout
} as const

const service = { capacity: 20, refillPerSecond: 40 } // some 429s from the real limiter at 20 clients

interface Counters {
  attempts: number
  replays: number
  status429: number
}

/** Counts what crosses the wire, below any retry logic. */
const counting = (counters: Counters) => (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  client.pipe(
    HttpClient.tapRequest(() => Effect.sync(() => counters.attempts++)),
    HttpClient.tap((response: HttpClientResponse.HttpClientResponse) =>
      Effect.sync(() => {
        if (response.headers["idempotent-replayed"] === "true") counters.replays++
        if (response.status === 429) counters.status429++
      })
    )
  )

type Outcome = { readonly created: true; readonly order: Order } | { readonly created: false; readonly reason: string }

const body = (ref: string) => HttpClientRequest.bodyUnsafeJson({ ref, sku: "BOOK-1", qty: 1 })

/** What many clients do: retry anything that went wrong, a few times, quickly. No key, no deadline. */
const naiveOrder = (client: HttpClient.HttpClient, url: string, ref: string): Effect.Effect<Outcome> =>
  Effect.gen(function*() {
    let reason = "no attempt"
    for (let attempt = 0; attempt < 4; attempt++) {
      const result = yield* client.execute(HttpClientRequest.post(url).pipe(body(ref))).pipe(
        Effect.flatMap((response) => Effect.map(response.json, (json) => ({ status: response.status, json }))),
        Effect.timeout("1 second"),
        Effect.either
      )
      if (result._tag === "Right" && result.right.status === 201) {
        return { created: true, order: result.right.json as Order }
      }
      reason = result._tag === "Left" ? result.left._tag : `HTTP ${result.right.status}`
      if (result._tag === "Right" && result.right.status < 500 && result.right.status !== 429) break
      yield* Effect.sleep("100 millis")
    }
    return { created: false, reason }
  })

/** The same intent with the library: one Idempotency-Key per order, deadline, jitter, budget, breaker. */
const resilientOrder = (
  client: ResilientHttpClient.ResilientHttpClient,
  url: string,
  ref: string
): Effect.Effect<Outcome> =>
  client.execute(HttpClientRequest.post(url).pipe(body(ref))).pipe(
    Effect.flatMap((response): Effect.Effect<Answer, unknown> =>
      // 409: the same key is still being processed; ask again after its Retry-After
      response.status === 409
        ? Effect.fail(Failure.retryable("in progress", "1 second"))
        : Effect.map(response.json, (json) => ({ status: response.status, json }))
    ),
    Retry.retry({ schedule: Backoff.exponential({ base: "1 second", cap: "1 second" }), maxAttempts: 5 }),
    Deadline.within("20 seconds"),
    Effect.map((r): Outcome =>
      r.status === 201 ? { created: true, order: r.json as Order } : { created: false, reason: `HTTP ${r.status}` }
    ),
    Effect.catchAll((error) => Effect.succeed<Outcome>({ created: false, reason: explain(error) }))
  )

interface Answer {
  readonly status: number
  readonly json: unknown
}

const explain = (error: unknown): string => {
  if (error instanceof Retry.RetriesExhausted) return `RetriesExhausted (${error.reason}): ${describe(error.last)}`
  return describe(error)
}

const describe = (last: unknown): string =>
  typeof last === "object" && last !== null && "_tag" in last
    ? (last as { _tag: string; status?: number })._tag + ("status" in last ? ` ${last.status}` : "")
    : String(last)

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
    const { app, created } = yield* makeOrdersApp({
      rate: service,
      idempotency: { required: false, lease: "10 seconds" }, // the naive client sends no key at all
      chaos: faults
    })
    yield* HttpServer.serveEffect(app)
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    const url = `http://127.0.0.1:${port}/orders`

    const counters: Counters = { attempts: 0, replays: 0, status429: 0 }
    const wire = counting(counters)(yield* HttpClient.HttpClient)
    const openingsBefore = yield* openingsSoFar

    const place: (ref: string) => Effect.Effect<Outcome> = kind === "naive"
      ? (ref) => naiveOrder(wire, url, ref)
      : yield* Effect.map(
        ResilientHttpClient.make({
          attemptTimeout: "1 second",
          retry: { schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }), maxAttempts: 8 },
          breaker: {
            trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { duration: "5 seconds" } }),
            openFor: "1 second"
          }
        }).pipe(Effect.provideService(HttpClient.HttpClient, wire)),
        (client) => (ref: string) => resilientOrder(client, url, ref)
      )

    const start = yield* Clock.currentTimeMillis
    let done = 0
    const refs = Array.from({ length: settings.orders }, (_, i) => `order-${String(i + 1).padStart(4, "0")}`)
    const outcomes = yield* Effect.forEach(
      refs,
      (ref) =>
        Effect.tap(place(ref), () =>
          Effect.sync(() => {
            settings.onProgress(++done)
          })),
      { concurrency: settings.clients }
    )
    const wallMs = (yield* Clock.currentTimeMillis) - start

    const inDb = new Map<string, number>()
    for (const order of created()) inDb.set(String(order["ref"]), (inDb.get(String(order["ref"])) ?? 0) + 1)
    const reasons: Record<string, number> = {}
    let lost = 0
    let gaveUp = 0
    let gaveUpButCreated = 0
    outcomes.forEach((outcome, i) => {
      const ref = refs[i]!
      if (outcome.created) {
        if ((inDb.get(ref) ?? 0) === 0) lost++
      } else {
        gaveUp++
        if ((inDb.get(ref) ?? 0) > 0) gaveUpButCreated++
        reasons[outcome.reason] = (reasons[outcome.reason] ?? 0) + 1
      }
    })
    const total = created().length
    return {
      logical: settings.orders,
      attempts: counters.attempts,
      retries: counters.attempts - settings.orders,
      replays: counters.replays,
      status429: counters.status429,
      honoured429: kind === "resilient" ? counters.status429 : 0,
      breakerOpenings: (yield* openingsSoFar) - openingsBefore,
      created: total,
      duplicates: total - inDb.size,
      lost,
      gaveUp,
      gaveUpButCreated,
      wallMs,
      gaveUpReasons: reasons
    } satisfies Summary
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.mergeAll(
      NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" }),
      NodeHttpClient.layerUndici,
      RateLimiterStore.layerMemory,
      sqliteStore,
      RetryBudget.layer({ maxTokens: 100, tokenRatio: 0.5 })
    )),
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
