/**
 * Issue 33, items 3 and 4: a real Prometheus (Debian's `prometheus` binary) scrapes the example service started
 * with `--metrics` and this test's own process, which drives the demo's traffic through the service with the
 * demo's resilient client (retries, budget, breaker), plus a bulkhead, an adaptive limiter and a rate limiter that
 * make calls wait, and a queue with a poison message. Then, over Prometheus's HTTP API: the series docs/observability.md promises exist and move (a
 * retry ratio, a breaker opening, a shed ratio, replays), every panel of observability/dashboard.json and every
 * rule of observability/alerts.yml returns a series, and `promtool check rules` accepts the rules.
 *
 * Real processes run on real time: every wait is for a condition, polled and bounded. Without `prometheus` the
 * tests are skipped, except under CI (`CI=true`), where a missing binary fails them.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schedule } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
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
} from "../src/index.js"
import { exampleArgs, pkg, startServe } from "./support/serveProcess.js"

const onPath = (binary: string) => {
  try {
    execFileSync("sh", ["-c", `command -v ${binary}`], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

const inCi = process.env["CI"] === "true"
const available = onPath("prometheus") && onPath("promtool")
if (inCi && !available) {
  throw new Error("CI needs prometheus and promtool on the PATH (.ci/run installs Debian's prometheus package)")
}

const rulesFile = join(pkg, "observability", "alerts.yml")
const dashboardFile = join(pkg, "observability", "dashboard.json")

interface Rule {
  readonly alert: string
  readonly expr: string
}

/** The rules' names and expressions (alerts.yml is plain: `- alert:` then `expr:`, folded with `>` or not). */
const rulesOf = (yaml: string): ReadonlyArray<Rule> => {
  const rules: Array<Rule> = []
  const lines = yaml.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const alert = /^\s*- alert: (\S+)/.exec(lines[i]!)
    if (alert === null) continue
    let j = i + 1
    while (!/^\s*expr:/.test(lines[j]!)) j++
    const first = lines[j]!.replace(/^\s*expr:\s*/, "")
    let expr = first
    if (first === ">") {
      const body: Array<string> = []
      const indent = /^(\s*)/.exec(lines[j + 1]!)![1]!.length
      for (
        let k = j + 1;
        k < lines.length && /^(\s*)/.exec(lines[k]!)![1]!.length >= indent && lines[k]!.trim() !== "";
        k++
      ) {
        body.push(lines[k]!.trim())
      }
      expr = body.join(" ")
    }
    rules.push({ alert: alert[1]!, expr })
  }
  return rules
}

/** A rule's expression without its threshold: the value it compares, which must exist for the rule to work. */
const withoutThreshold = (expr: string) => expr.replace(/\s*(==|!=|>=|<=|>|<)\s*[\d.]+\s*$/, "")

/** Every panel's PromQL, with Grafana's `$__rate_interval` as a window that covers a few 1 s scrapes. */
const panelsOf = (json: string) => {
  const dashboard = JSON.parse(json) as {
    readonly panels: ReadonlyArray<
      { readonly title: string; readonly targets?: ReadonlyArray<{ readonly expr: string }> }
    >
  }
  return dashboard.panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({
      title: panel.title,
      expr: target.expr.replaceAll("$__rate_interval", "30s")
    }))
  )
}

const freePort = () =>
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
const serveOwnMetrics = Effect.acquireRelease(
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

const startPrometheus = (targets: { readonly orders: string; readonly client: string }) =>
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

interface Sample {
  readonly metric: Readonly<Record<string, string>>
  readonly value: readonly [number, string]
}

/** One PromQL instant query; the series it returns. */
const query = (prometheus: string, expr: string) =>
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
const eventually = (what: string, check: Effect.Effect<boolean>, capMillis = 90_000) =>
  check.pipe(
    Effect.flatMap((ok) => ok ? Effect.void : Effect.fail(new Error(`not yet: ${what}`))),
    Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo({ duration: capMillis })))
  )

/** True when the expression returns a series with a value above 0. */
const positive = (prometheus: string, expr: string) =>
  Effect.map(query(prometheus, expr), (series) => series.some((s) => Number(s.value[1]) > 0))

const returnsASeries = (prometheus: string, expr: string) =>
  Effect.map(query(prometheus, expr), (series) => series.length > 0)

/**
 * The demo's traffic, round after round until interrupted: the demo's resilient client (one key per order,
 * jittered backoff, a budget, a breaker per origin) placing orders of which some fail with 500 (retried, then
 * opening the breaker, then spending the budget) and some are placed twice with one key (a replay); a burst
 * of sheddable requests slower than the shed limit allows; a bulkhead and a rate limiter that make calls wait;
 * a queue whose poison message is dead-lettered.
 */
const traffic = (orders: string) =>
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
      yield* Effect.forEach(
        Array.from({ length: 10 }, (_, i) => i),
        (i) =>
          i < 4
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

describe("serve --metrics", () => {
  it("is named in serve --help, after the usage both editions share", () => {
    const out = execFileSync(process.execPath, exampleArgs("examples/serve.ts", ["--help"]), {
      cwd: pkg,
      encoding: "utf8"
    })
    expect(out).toMatch(/^usage: npm run serve/)
    expect(out).toContain("--metrics: also serve GET /metrics")
  })
})

describe.skipIf(!available)("Prometheus scrapes the service and checks the dashboard and the alerts", () => {
  it("promtool check rules accepts observability/alerts.yml", () => {
    const out = execFileSync("promtool", ["check", "rules", rulesFile], { encoding: "utf8" })
    expect(out).toContain(`SUCCESS: ${rulesOf(readFileSync(rulesFile, "utf8")).length} rules found`)
  })

  it.live("the promised series exist and move; every panel and rule returns a series", () =>
    Effect.gen(function*() {
      const service = yield* startServe(["--metrics", "--shed", "adaptive", "--rate", "200:100"])
      const own = yield* serveOwnMetrics
      const ownPort = (own.address() as AddressInfo).port
      const prometheus = yield* startPrometheus({
        orders: service.url.replace("http://", ""),
        client: `127.0.0.1:${ownPort}`
      })
      const p = prometheus.url
      yield* eventually(
        "Prometheus scrapes both targets",
        Effect.map(query(p, "up"), (series) => series.filter((s) => s.value[1] === "1").length === 2),
        30_000
      ).pipe(Effect.mapError((e) => new Error(`${e.message}\n${prometheus.log()}`)))
      const driving = yield* Effect.forkChild(traffic(service.url))

      // what docs/observability.md promises, moving
      const promised = {
        "retry ratio":
          "sum by (client) (rate(effect_resilience_retries_total{client=\"demo\"}[30s])) / sum by (client) " +
          "(rate(effect_resilience_http_client_operation_duration_seconds_count{client=\"demo\"}[30s]))",
        "breaker opening": "sum(increase(effect_resilience_breaker_transitions_total{to=\"open\"}[1m]))",
        "shed ratio":
          "sum by (criticality) (rate(effect_resilience_load_shed_requests_total{decision!=\"admitted\"}[30s])) " +
          "/ sum by (criticality) (rate(effect_resilience_load_shed_requests_total[30s]))",
        "replays": "sum(increase(effect_resilience_idempotency_requests_total{outcome=\"replay\"}[1m]))",
        "attempt duration":
          "sum(rate(http_client_request_duration_seconds_count{client=\"demo\",error_type=\"500\"}[30s]))",
        "budget refusals":
          "sum(increase(effect_resilience_retries_exhausted_total{client=\"demo-budget\",reason=\"budget\"}[1m]))",
        "dead letters": "sum(increase(effect_resilience_queue_dead_lettered_total{queue=\"demo-queue\"}[1m]))"
      }
      for (const [what, expr] of Object.entries(promised)) {
        yield* eventually(what, positive(p, expr))
      }

      // every dashboard panel and every rule: a series (a rule's expression without its threshold at least)
      const panels = panelsOf(readFileSync(dashboardFile, "utf8"))
      expect(panels.length).toBeGreaterThan(15)
      for (const panel of panels) {
        yield* eventually(`panel "${panel.title}": ${panel.expr}`, returnsASeries(p, panel.expr))
      }
      const rules = rulesOf(readFileSync(rulesFile, "utf8"))
      expect(rules.map((r) => r.alert)).toHaveLength(8)
      for (const rule of rules) {
        yield* eventually(`rule ${rule.alert}: ${rule.expr}`, returnsASeries(p, withoutThreshold(rule.expr)))
      }
      // and Prometheus loaded the rules: each is there, with its health
      const loaded = yield* Effect.promise(async () => {
        const response = await fetch(`${p}/api/v1/rules`)
        const body = await response.json() as {
          data: { groups: Array<{ rules: Array<{ name: string; health: string }> }> }
        }
        return body.data.groups.flatMap((g) => g.rules)
      })
      expect(loaded.map((r) => r.name).sort()).toEqual(rules.map((r) => r.alert).sort())
      yield* Fiber.interrupt(driving)
    }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)), 240_000)
})
