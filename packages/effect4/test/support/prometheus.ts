/**
 * Issue 33's real Prometheus, shared by test/observability.int.test.ts and observability/screenshot.ts
 * (`npm run dashboard:screenshot`): Debian's `prometheus` on a free port scraping the example service and this
 * process' own metrics, PromQL over its HTTP API, the dashboard's panels, and the demo's traffic.
 *
 * Real processes run on real time: every wait is for a condition, polled and bounded.
 */
import { Effect, Schedule } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  AdaptiveLimiter,
  Backoff,
  Bulkhead,
  CircuitBreaker,
  Consumer,
  QueueSource,
  RateLimiter,
  RateLimiterStore,
  ResilientHttpClient
} from "../../src/index.js"
import { pkg } from "./serveProcess.js"

/** True when `binary` is on the PATH. */
export const onPath = (binary: string) => {
  try {
    execFileSync("sh", ["-c", `command -v ${binary}`], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

export const rulesFile = join(pkg, "observability", "alerts.yml")
export const dashboardFile = join(pkg, "observability", "dashboard.json")

/** A timeseries panel of the dashboard with one of its queries. */
export interface PanelQuery {
  readonly title: string
  readonly expr: string
  readonly legendFormat: string
}

/**
 * Every panel's PromQL, with Grafana's `$__rate_interval` as `rateInterval`: by default a window that covers a few
 * 1 s scrapes.
 */
export const panelsOf = (json: string, rateInterval = "30s"): ReadonlyArray<PanelQuery> => {
  const dashboard = JSON.parse(json) as {
    readonly panels: ReadonlyArray<{
      readonly title: string
      readonly targets?: ReadonlyArray<{ readonly expr: string; readonly legendFormat?: string }>
    }>
  }
  return dashboard.panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({
      title: panel.title,
      expr: target.expr.replaceAll("$__rate_interval", rateInterval),
      legendFormat: target.legendFormat ?? ""
    }))
  )
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
    server.on("error", reject)
  })

/**
 * This process' metrics on a port of its own, as `serve --metrics` serves the service's: those of the test's
 * context (its metric registry), where the traffic below runs.
 */
export const serveOwnMetrics = Effect.acquireRelease(
  Effect.flatMap(Effect.context<never>(), (context) =>
    Effect.promise(() =>
      new Promise<Server>((resolve) => {
        const server = createServer((_, res) => {
          res.writeHead(200, { "content-type": "text/plain; version=0.0.4" })
          res.end(PrometheusMetrics.formatUnsafe(context))
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    )),
  (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

export const startPrometheus = (targets: { readonly orders: string; readonly client: string }) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "effect-resilience-prometheus-"))
      const port = yield* Effect.promise(freePort)
      writeFileSync(
        join(dir, "prometheus.yml"),
        [
          "global:",
          "  scrape_interval: 1s",
          "  evaluation_interval: 1s",
          "rule_files:",
          `  - ${rulesFile}`,
          "scrape_configs:",
          "  - job_name: orders",
          `    static_configs: [{ targets: ["${targets.orders}"] }]`,
          "  - job_name: client",
          `    static_configs: [{ targets: ["${targets.client}"] }]`,
          ""
        ].join("\n")
      )
      const child: ChildProcess = spawn("prometheus", [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`
      ], { stdio: ["ignore", "ignore", "pipe"] })
      let log = ""
      child.stderr!.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000)))
      return { url: `http://127.0.0.1:${port}`, child, dir, log: () => log }
    }),
    ({ child, dir }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          child.once("exit", () => {
            rmSync(dir, { recursive: true, force: true })
            resolve()
          })
          if (!child.kill("SIGTERM")) resolve()
        })
      )
  )

export interface Sample {
  readonly metric: Readonly<Record<string, string>>
  readonly value: readonly [number, string]
}

/** One PromQL instant query; the series it returns. */
export const query = (prometheus: string, expr: string) =>
  Effect.promise(async (): Promise<ReadonlyArray<Sample>> => {
    try {
      const response = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(expr)}`)
      const body = await response.json() as { status: string; error?: string; data?: { result: Array<Sample> } }
      if (body.status !== "success") throw new Error(`${expr}: ${body.error}`)
      return body.data!.result
    } catch (error) {
      if (error instanceof Error && error.message.startsWith(expr)) throw error
      return [] // Prometheus not up yet
    }
  })

/** Polls until `check` holds (every 500 ms, for at most `capMillis` of real time). */
export const eventually = (what: string, check: Effect.Effect<boolean>, capMillis = 90_000) =>
  check.pipe(
    Effect.flatMap((ok) => ok ? Effect.void : Effect.fail(new Error(`not yet: ${what}`))),
    Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo({ duration: capMillis })))
  )

/** True when the expression returns a series with a value above 0. */
export const positive = (prometheus: string, expr: string) =>
  Effect.map(query(prometheus, expr), (series) => series.some((s) => Number(s.value[1]) > 0))

export const returnsASeries = (prometheus: string, expr: string) =>
  Effect.map(query(prometheus, expr), (series) => series.length > 0)

/**
 * The demo's traffic, round after round until interrupted: the demo's resilient client (one key per order,
 * jittered backoff, a budget, a breaker per origin) placing orders of which some fail with 500 (retried, then
 * opening the breaker, then spending the budget) and some are placed twice with one key (a replay); a burst
 * of sheddable requests slower than the shed limit allows; a bulkhead and a rate limiter that make calls wait;
 * a queue whose poison message is dead-lettered.
 */
export const traffic = (
  orders: string,
  options: {
    /** How many of each round's ten orders fail with 500, asked before each round (default 4). */
    readonly failing?: () => number
  } = {}
) =>
  Effect.gen(function*() {
    const client = yield* ResilientHttpClient.make({
      name: "demo",
      attemptTimeout: "2 seconds",
      retry: {
        schedule: Backoff.fullJitter({ base: "20 millis", cap: "200 millis" }),
        maxAttempts: 4,
        budget: { maxTokens: 100, tokenRatio: 1 } // refills as fast as the failures take: it keeps retrying
      },
      breaker: {
        trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 10, window: { duration: "5 seconds" } }),
        openFor: "1 second",
        keyLabel: true
      }
    })
    // a client with a budget too small for its failures: its retries are refused for budget
    const stingy = yield* ResilientHttpClient.make({
      name: "demo-budget",
      retry: {
        schedule: Backoff.fullJitter({ base: "20 millis", cap: "200 millis" }),
        maxAttempts: 4,
        budget: { maxTokens: 2, tokenRatio: 0.1 }
      }
    })
    const plain = yield* HttpClient.HttpClient
    const bulkhead = yield* Bulkhead.make({ maxConcurrent: 1, maxQueue: 10, name: "demo-bulkhead" })
    const adaptive = yield* AdaptiveLimiter.make({
      algorithm: AdaptiveLimiter.aimd(),
      minLimit: 1,
      maxLimit: 1,
      maxQueue: 10,
      name: "demo-limiter"
    })
    const limiter = yield* RateLimiter.tokenBucket({ capacity: 1, refillPerSecond: 20, name: "demo-acquire" })
    const source = yield* QueueSource.memory<{ readonly poison: boolean }>({
      name: "demo-queue",
      visibilityTimeout: "5 seconds"
    })
    yield* Consumer.run({
      source,
      handler: (m) => m.body.poison ? Effect.fail("poison") : Effect.void,
      maxReceiveCount: 2, // released once, then dead-lettered
      redeliveryDelay: "10 millis",
      pollInterval: "50 millis"
    })
    const order = (ref: string, query = "") =>
      HttpClientRequest.post(`${orders}/orders${query}`).pipe(
        HttpClientRequest.setHeader("idempotency-key", `"${ref}"`),
        HttpClientRequest.bodyJsonUnsafe({ ref, sku: "BOOK-1", qty: 1 })
      )
    const place = (
      request: HttpClientRequest.HttpClientRequest,
      by: ResilientHttpClient.ResilientHttpClient = client
    ) => Effect.ignore(Effect.scoped(Effect.flatMap(by.execute(request), (r) => r.text)))
    for (let round = 0;; round++) {
      const id = `${Date.now().toString(36)}-${round}`
      const failing = options.failing?.() ?? 4
      yield* Effect.forEach(
        Array.from({ length: 10 }, (_, i) => i),
        (i) =>
          // the last ones fail: the first, which a half-open breaker lets through as its probe, fails only when all do
          i >= 10 - failing
            ? place(order(`${id}-fail-${i}`, "?fail=500"))
            : Effect.andThen(place(order(`${id}-ok-${i}`)), place(order(`${id}-ok-${i}`))), // the second: a replay
        { concurrency: "unbounded", discard: true }
      )
      yield* place(order(`${id}-stingy`, "?fail=500"), stingy)
      // keyed, so each reaches the handler (and its delay) holding its load-shed slot
      yield* Effect.forEach(
        Array.from({ length: 24 }, (_, i) => i),
        (i) =>
          Effect.ignore(Effect.scoped(
            plain.execute(
              HttpClientRequest.post(`${orders}/orders?delayMs=300`).pipe(
                HttpClientRequest.setHeader("request-criticality", "sheddable"),
                HttpClientRequest.setHeader("idempotency-key", `"${id}-shed-${i}"`),
                HttpClientRequest.bodyJsonUnsafe({ sku: "BOOK-1", qty: 1 })
              )
            )
          )),
        { concurrency: "unbounded", discard: true }
      )
      yield* Effect.forEach([1, 2, 3], () => bulkhead.protect(Effect.sleep("20 millis")), {
        concurrency: "unbounded",
        discard: true
      })
      yield* Effect.forEach([1, 2, 3], () => adaptive.protect(Effect.sleep("20 millis")), {
        concurrency: "unbounded",
        discard: true
      })
      yield* Effect.forEach([1, 2, 3], () => limiter.acquire("demo"), { discard: true })
      yield* source.send([{ id: `${id}-ok`, body: { poison: false } }, { id: `${id}-poison`, body: { poison: true } }])
      yield* Effect.sleep("200 millis")
    }
  }).pipe(
    Effect.scoped,
    Effect.provide(RateLimiterStore.layerMemory),
    Effect.tapCause((cause) => Effect.logError("the traffic stopped", cause))
  )
