/**
 * Issue 33, items 3 and 4: a real Prometheus (Debian's `prometheus` binary) scrapes the example service started
 * with `--metrics` and this test's own process, which drives the demo's traffic through the service with the
 * demo's resilient client (retries, budget, breaker), plus a bulkhead, an adaptive limiter and a rate limiter that
 * make calls wait, and a queue with a poison message. Then, over Prometheus's HTTP API: the series docs/observability.md promises exist and move (a
 * retry ratio, a breaker opening, a shed ratio, replays), every panel of observability/dashboard.json and every
 * rule of observability/alerts.yml returns a series, and `promtool check rules` accepts the rules.
 *
 * The Prometheus, the scrapes and the traffic are test/support/prometheus.ts's, which `npm run dashboard:screenshot`
 * (observability/screenshot.ts) shares. Real processes run on real time: every wait is for a condition, polled and
 * bounded. Without `prometheus` the tests are skipped, except under CI (`CI=true`), where a missing binary fails them.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import type { AddressInfo } from "node:net"
import {
  dashboardFile,
  eventually,
  onPath,
  panelsOf,
  positive,
  query,
  returnsASeries,
  rulesFile,
  serveOwnMetrics,
  startPrometheus,
  traffic
} from "./support/prometheus.js"
import { exampleArgs, pkg, startServe } from "./support/serveProcess.js"

const inCi = process.env["CI"] === "true"
const available = onPath("prometheus") && onPath("promtool")
if (inCi && !available) {
  throw new Error("CI needs prometheus and promtool on the PATH (.ci/run installs Debian's prometheus package)")
}

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
