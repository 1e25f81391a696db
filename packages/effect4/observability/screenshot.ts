/**
 * `npm run dashboard:screenshot`: docs/images/dashboard.png, the data of every panel of dashboard.json as Prometheus
 * has it. Starts what test/observability.int.test.ts starts (Debian's `prometheus` scraping `npm run serve --
 * --metrics` and this process every second) and drives the demo's traffic through the service for two minutes: calm
 * (1 order of 10 failing with 500), an incident (7 of 10 failing), calm again. Then serves screenshot.html, which
 * asks Prometheus's `/api/v1/query_range` for each panel's expression over that run and draws it, and takes its
 * picture with `playwright-core` and Debian's `chromium`. Not a test: it needs `prometheus` and `chromium` on the
 * PATH (`CHROMIUM` names another binary), and real time.
 *
 * Options: `--seconds N` (the run's length, default 120), `--out FILE` (default docs/images/dashboard.png).
 */
import { NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { Effect, Fiber } from "effect"
import { execFileSync } from "node:child_process"
import { mkdirSync, readFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { dirname, join } from "node:path"
import { parseArgs } from "node:util"
import { chromium } from "playwright-core"
import {
  dashboardFile,
  eventually,
  onPath,
  panelsOf,
  query,
  returnsASeries,
  serveOwnMetrics,
  startPrometheus,
  traffic
} from "../test/support/prometheus.js"
import { pkg, startServe } from "../test/support/serveProcess.js"

const { values: options } = parseArgs({
  options: {
    seconds: { type: "string", default: "120" },
    out: { type: "string", default: join(pkg, "..", "..", "docs", "images", "dashboard.png") }
  }
})
const seconds = Number(options.seconds)
/** The incident: from a quarter of the run to its 60 %, 7 orders of 10 fail; otherwise 1 does. */
const incident = { from: seconds * 0.25, to: seconds * 0.6 }
/** The rate window the page puts for Grafana's `$__rate_interval`, and the step of its queries, in seconds. */
const rateInterval = "10s"
const step = 2

const chromiumPath = () => {
  const path = process.env["CHROMIUM"] ?? execFileSync("sh", ["-c", "command -v chromium || true"], {
    encoding: "utf8"
  }).trim()
  if (path === "") throw new Error("no chromium on the PATH: apt-get install -y chromium (or set CHROMIUM)")
  return path
}

/** screenshot.html at /, dashboard.json, and Prometheus's /api/v1/ proxied: one origin for the page. */
const servePage = (prometheus: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<Server>((resolve) => {
        const server = createServer((req, res) => {
          const url = new URL(req.url ?? "/", "http://127.0.0.1")
          const send = (status: number, type: string, body: string) => {
            res.writeHead(status, { "content-type": type })
            res.end(body)
          }
          if (url.pathname === "/") {
            send(200, "text/html; charset=utf-8", readFileSync(join(pkg, "observability", "screenshot.html"), "utf8"))
          } else if (url.pathname === "/dashboard.json") {
            send(200, "application/json", readFileSync(dashboardFile, "utf8"))
          } else if (url.pathname.startsWith("/api/v1/")) {
            fetch(`${prometheus}${url.pathname}${url.search}`).then(
              async (answer) => send(answer.status, "application/json", await answer.text()),
              (error) => send(502, "text/plain", String(error))
            )
          } else {
            send(404, "text/plain", "not found")
          }
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    ),
    (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

interface PanelSummary {
  readonly title: string
  readonly error?: string
  readonly series?: ReadonlyArray<{ readonly name: string; readonly points: number; readonly distinct: number }>
}

/** Opens the page in headless Chromium, waits until every panel is drawn, saves the picture; what each panel got. */
const photograph = (url: string, out: string) =>
  Effect.promise(async () => {
    const browser = await chromium.launch({ executablePath: chromiumPath(), headless: true })
    try {
      const page = await browser.newPage({ viewport: { width: 1200, height: 900 }, deviceScaleFactor: 1 })
      await page.goto(url)
      await page.waitForSelector("body[data-ready]", { timeout: 120_000 })
      const summary = await page.evaluate("window.summary") as ReadonlyArray<PanelSummary>
      mkdirSync(dirname(out), { recursive: true })
      await page.screenshot({ path: out, fullPage: true })
      return summary
    } finally {
      await browser.close()
    }
  })

const program = Effect.gen(function*() {
  if (!onPath("prometheus")) {
    return yield* Effect.fail(new Error("no prometheus on the PATH: apt-get install prometheus"))
  }
  chromiumPath()
  const service = yield* startServe(["--metrics", "--shed", "adaptive", "--rate", "200:100"])
  const own = yield* serveOwnMetrics
  const prometheus = yield* startPrometheus({
    orders: service.url.replace("http://", ""),
    client: `127.0.0.1:${(own.address() as AddressInfo).port}`
  })
  const p = prometheus.url
  yield* eventually(
    "Prometheus scrapes both targets",
    Effect.map(query(p, "up"), (series) => series.filter((s) => s.value[1] === "1").length === 2),
    30_000
  ).pipe(Effect.mapError((e) => new Error(`${e.message}\n${prometheus.log()}`)))

  const started = performance.now()
  const elapsed = () => (performance.now() - started) / 1000
  const start = Math.floor(Date.now() / 1000)
  yield* Effect.log(`${service.url} under the demo's traffic for ${seconds} s; Prometheus at ${p}`)
  const driving = yield* Effect.forkChild(traffic(service.url, {
    failing: () => (elapsed() >= incident.from && elapsed() < incident.to ? 7 : 1)
  }))
  yield* Effect.sleep(`${seconds} seconds`)
  // every panel has its series by now (as the test checks), or it is waited for
  for (const panel of panelsOf(readFileSync(dashboardFile, "utf8"), rateInterval)) {
    yield* eventually(`panel "${panel.title}": ${panel.expr}`, returnsASeries(p, panel.expr), 30_000)
  }
  const end = Math.ceil(Date.now() / 1000)
  yield* Fiber.interrupt(driving)

  const page = yield* servePage(p)
  const note = `npm run serve -- --metrics --shed adaptive --rate 200:100 under the demo's traffic, scraped every ` +
    `1 s; $__rate_interval = ${rateInterval}; times in UTC. Shaded: the incident, 7 orders of 10 failing with 500 ` +
    `(else 1 of 10).`
  const search = new URLSearchParams({
    start: String(start),
    end: String(end),
    step: String(step),
    rate: rateInterval,
    incident: `${start + incident.from},${start + incident.to}`,
    note
  })
  const summary = yield* photograph(`http://127.0.0.1:${(page.address() as AddressInfo).port}/?${search}`, options.out)
  for (const panel of summary) {
    const series = (panel.series ?? []).map((s) => `${s.name} (${s.points} points, ${s.distinct} values)`)
    yield* Effect.log(`${panel.title}: ${panel.error ?? (series.join(", ") || "NO DATA")}`)
  }
  const empty = summary.filter((panel) => panel.error !== undefined || (panel.series ?? []).length === 0)
  if (empty.length > 0) {
    return yield* Effect.fail(new Error(`panels without data: ${empty.map((panel) => panel.title).join("; ")}`))
  }
  yield* Effect.log(`wrote ${options.out}`)
}).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici))

NodeRuntime.runMain(program)
