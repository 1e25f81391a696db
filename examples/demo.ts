/**
 * `npm run demo` — the duplicate-order story, end to end, with real parts.
 *
 * An orders service (the `serve` example: rate limiter, idempotency middleware, SQLite store in a temporary
 * directory) runs on 127.0.0.1 behind an unreliable network: some responses are lost after the order was
 * committed, some requests get 503 with Retry-After, some are slower than the clients' read timeout, and
 * the real limiter answers 429 when clients push too hard. The same batch of logical orders is placed
 * twice: by a naive client (blind retries, no key, no deadline) and by this library's client.
 *
 *   npm run demo [-- --seed 7] [--orders 200] [--clients 20] [--quick] [--json]
 */
import { Effect } from "effect"
import { run, type Summary } from "./demo/scenario.js"

const argv = process.argv.slice(2)
const flag = (name: string) => argv.includes(`--${name}`)
const option = (name: string, fallback: number) => {
  const i = argv.indexOf(`--${name}`)
  if (i === -1) return fallback
  const value = Number(argv[i + 1])
  if (!Number.isInteger(value) || value < 1) {
    console.error(`--${name} needs a positive integer`)
    process.exit(2)
  }
  return value
}

const json = flag("json")
const quick = flag("quick")
const seed = option("seed", 42)
const orders = option("orders", quick ? 60 : 200)
const clients = option("clients", quick ? 10 : 20)
const tty = process.stderr.isTTY === true && !json

const progress = (label: string) => (done: number) => {
  if (!tty) return
  const width = 30
  const filled = Math.round((done / orders) * width)
  process.stderr.write(`\r  ${label.padEnd(10)} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${orders}`)
  if (done === orders) process.stderr.write("\n")
}

const rows: ReadonlyArray<readonly [string, (s: Summary) => string | number]> = [
  ["logical orders", (s) => s.logical],
  ["HTTP attempts", (s) => s.attempts],
  ["retries", (s) => s.retries],
  ["replays served", (s) => s.replays],
  ["429 answers", (s) => s.status429],
  ["  … honoured (waited Retry-After)", (s) => s.honoured429],
  ["breaker openings", (s) => s.breakerOpenings],
  ["orders in the database", (s) => s.created],
  ["duplicates", (s) => s.duplicates],
  ["lost (reported created, missing)", (s) => s.lost],
  ["gave up (told the caller)", (s) => s.gaveUp],
  ["  … but the order exists", (s) => s.gaveUpButCreated],
  ["wall time", (s) => `${(s.wallMs / 1000).toFixed(1)} s`]
]

const table = (naive: Summary, resilient: Summary) => {
  const lines = [`  ${"".padEnd(34)} ${"naive".padStart(10)} ${"resilient".padStart(10)}`]
  for (const [label, get] of rows) {
    lines.push(`  ${label.padEnd(34)} ${String(get(naive)).padStart(10)} ${String(get(resilient)).padStart(10)}`)
  }
  return lines.join("\n")
}

const reasons = (summary: Summary) =>
  Object.entries(summary.gaveUpReasons).map(([reason, n]) => `    ${String(n).padStart(4)} × ${reason}`).join("\n")

const program = Effect.gen(function*() {
  if (!json) {
    console.log(`Placing ${orders} logical orders from ${clients} concurrent clients through an unreliable network`)
    console.log("(8% of responses lost after the commit, 5% 503 + Retry-After, 4% slower than the 1 s read")
    console.log(`timeout, and a real rate limiter). Seed ${seed}.\n`)
  }
  const naive = yield* run("naive", { seed, orders, clients, onProgress: progress("naive") })
  const resilient = yield* run("resilient", { seed, orders, clients, onProgress: progress("resilient") })
  if (json) {
    console.log(JSON.stringify({ seed, naive, resilient }))
    return
  }
  console.log(`\n${table(naive, resilient)}\n`)
  if (naive.gaveUp > 0) console.log(`  the naive client gave up on:\n${reasons(naive)}`)
  if (resilient.gaveUp > 0) console.log(`  the resilient client gave up on:\n${reasons(resilient)}`)
  console.log(
    `\n  naive: ${naive.duplicates} duplicate order(s) — retrying a POST whose answer was lost, without a key,` +
      ` places it again.\n  resilient: ${resilient.duplicates} duplicates, ${resilient.lost} lost — one Idempotency-Key` +
      " per order turns every retry into a replay."
  )
})

Effect.runPromise(program).catch((error) => {
  console.error("the demo failed:", error)
  process.exitCode = 1
})
