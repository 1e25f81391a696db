/**
 * Issue #22, "Scale, not only speed": requests/s and p99 of `POST /orders` (idempotency middleware, a new
 * key per request: a claim and a completion each) through 1, 2 and 3 `npm run serve -- --store <s>` processes
 * sharing one store, behind one closed-loop load generator that spreads its requests over them round-robin.
 *
 *   npm run bench:scale -- [--stores postgres,redis,sqlite] [--processes 1,2,3] [--seconds 6] [--in-flight 48] [--json]
 *
 * in packages/effect4 (the trunk) or packages/effect3 (the LTS): Effect-free, shared by both editions, it starts
 * the `serve` example of the edition it is given (`--edition effect4|effect3`, default effect4) from that
 * package's folder.
 *
 * Real processes, real sockets and real time on purpose: this is what a deployment does. The generator is one
 * Node process with a keep-alive agent per server, so its own cost stays small next to three servers'. The
 * machine's CPUs are shared by the generator, the servers and the store: on a 2-CPU machine more processes
 * cannot add throughput, they show what sharing the store costs (docs/stores.md has the figures).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { Agent, request } from "node:http"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : process.argv[i + 1] ?? fallback
}
const stores = arg("stores", "postgres,redis,sqlite").split(",")
const counts = arg("processes", "1,2,3").split(",").map(Number)
const seconds = Number(arg("seconds", "6"))
const inFlight = Number(arg("in-flight", "48"))
const json = process.argv.includes("--json")
const edition = arg("edition", "effect4")
if (edition !== "effect4" && edition !== "effect3") throw new Error(`--edition effect4|effect3, not ${edition}`)
const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..", "packages", edition)
/** How each edition runs its examples (package.json's `serve`): Effect 4 on Node's own type stripping. */
const serveCommand = edition === "effect4"
  ? [
    "--disable-warning=ExperimentalWarning",
    "--experimental-transform-types",
    "--import",
    "./scripts/tsResolve.mjs",
    "examples/serve.ts"
  ]
  : ["--import", "tsx", "examples/serve.ts"]
const log = (line: string) => {
  if (!json) console.log(line)
}

interface Server {
  readonly child: ChildProcess
  readonly port: number
}

/** One `npm run serve` process; resolves once it printed its port (a condition, not a guess). */
const start = (store: string, db: string): Promise<Server> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        ...serveCommand,
        "--port",
        "0",
        "--store",
        store,
        "--db",
        db,
        // the orders app limits each caller: out of the way here, every request must reach the middleware
        "--rate",
        "100000000:100000000"
      ],
      { stdio: ["ignore", "pipe", "inherit"], cwd: packageDir }
    )
    let out = ""
    const timer = setTimeout(() => reject(new Error(`serve --store ${store} did not start within 60 s`)), 60_000)
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)
      if (m !== null) {
        clearTimeout(timer)
        resolve({ child, port: Number(m[1]) })
      }
    })
    child.on("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`serve --store ${store} exited with ${code}: ${out}`))
    })
  })

/** SIGTERM, then waits for the exit (the servers finish the requests in flight first). */
const stop = (s: Server): Promise<void> =>
  new Promise((resolve) => {
    if (s.child.exitCode !== null) return resolve()
    s.child.removeAllListeners("exit")
    s.child.on("exit", () => resolve())
    s.child.kill("SIGTERM")
    setTimeout(() => s.child.kill("SIGKILL"), 10_000).unref()
  })

const post = (agent: Agent, port: number): Promise<number> =>
  new Promise((resolve, reject) => {
    const body = "{\"sku\":\"SCALE-1\",\"qty\":1}"
    const req = request({
      host: "127.0.0.1",
      port,
      path: "/orders",
      method: "POST",
      agent,
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "idempotency-key": randomUUID()
      }
    }, (res) => {
      res.resume()
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", reject)
    req.end(body)
  })

interface Row {
  readonly store: string
  readonly processes: number
  readonly requestsPerSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly errors: number
}

/** `inFlight` workers posting back to back for `millis`, round-robin over the ports; latencies of each. */
const load = async (ports: ReadonlyArray<number>, millis: number) => {
  const agents = ports.map(() => new Agent({ keepAlive: true, maxSockets: inFlight }))
  const latencies: Array<number> = []
  let errors = 0
  let next = 0
  const end = performance.now() + millis
  const worker = async () => {
    while (performance.now() < end) {
      const i = next++ % ports.length
      const t0 = performance.now()
      const status = await post(agents[i]!, ports[i]!).catch(() => 0)
      if (status !== 201) errors++
      latencies.push(performance.now() - t0)
    }
  }
  const t0 = performance.now()
  await Promise.all(Array.from({ length: inFlight }, worker))
  const elapsed = (performance.now() - t0) / 1000
  for (const a of agents) a.destroy()
  latencies.sort((a, b) => a - b)
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? NaN
  return { requestsPerSecond: latencies.length / elapsed, p50Ms: at(0.5), p99Ms: at(0.99), errors }
}

const rows: Array<Row> = []
const dir = mkdtempSync(join(tmpdir(), "bench-scale-"))
const running: Array<Server> = []
const cleanup = async () => {
  await Promise.all(running.splice(0).map(stop))
}
process.on("SIGINT", () => void cleanup().then(() => process.exit(130)))
try {
  for (const store of stores) {
    for (const n of counts) {
      const db = join(dir, `${store}-${n}.db`)
      for (let i = 0; i < n; i++) running.push(await start(store, db))
      const ports = running.map((s) => s.port)
      await load(ports, 1500) // warm-up: connections, JIT, the store's pool
      const r = await load(ports, seconds * 1000)
      await cleanup()
      rows.push({ store, processes: n, ...r })
      log(
        `${store.padEnd(9)} ${String(n).padStart(2)} process${n === 1 ? "  " : "es"}  ` +
          `${r.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${r.p50Ms.toFixed(1).padStart(6)} ms  ` +
          `p99 ${r.p99Ms.toFixed(1).padStart(6)} ms${r.errors > 0 ? `  ${r.errors} not 201` : ""}`
      )
    }
  }
} finally {
  await cleanup()
  rmSync(dir, { recursive: true, force: true })
}
if (json) console.log(JSON.stringify({ edition, rows }))
