/**
 * `npm run demo` — the duplicate-order story, end to end, with real parts.
 *
 * An orders service (the `serve` example: rate limiter, idempotency middleware, SQLite store in a temporary
 * directory) runs on 127.0.0.1 behind an unreliable network: some responses are lost after the order was
 * committed, some requests get 503 with Retry-After, some are slower than the clients' read timeout, and
 * the real limiter answers 429 when clients push too hard. Which attempt meets which fault follows the seed
 * (examples/demo/faults.ts). The same batch of logical orders is placed twice: by a naive client (blind
 * retries, no key, no deadline) and by this library's client.
 *
 *   npm run demo [-- --seed 7] [--orders 200] [--clients 20] [--quick] [--json] [--help]
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { parseArgs, usage } from "../../../examples/demo/args.js"
import { footer, intro, reasons, table } from "./demo/report.js"
import { run } from "./demo/scenario.js"

const parsed = parseArgs(process.argv.slice(2))
if (parsed._tag === "Help") {
  console.log(usage)
  process.exit(0)
}
if (parsed._tag === "Invalid") {
  console.error(`${parsed.message}\n${usage}`)
  process.exit(2)
}
const { clients, json, orders, seed } = parsed.args
const tty = process.stderr.isTTY === true && !json

const progress = (label: string) => (done: number) => {
  if (!tty) return
  const width = 30
  const filled = Math.round((done / orders) * width)
  process.stderr.write(`\r  ${label.padEnd(10)} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${orders}`)
  if (done === orders) process.stderr.write("\n")
}

const program = Effect.gen(function*() {
  if (!json) console.log(`${intro({ orders, clients, seed })}\n`)
  const naive = yield* run("naive", { seed, orders, clients, onProgress: progress("naive") })
  const resilient = yield* run("resilient", { seed, orders, clients, onProgress: progress("resilient") })
  if (json) {
    console.log(JSON.stringify({ seed, naive, resilient }))
    return
  }
  console.log(`\n${table(naive, resilient)}\n`)
  for (const text of [reasons("naive", naive), reasons("resilient", resilient)]) {
    if (text !== "") console.log(`${text}\n`)
  }
  console.log(footer(naive, resilient))
})

// runMain: Ctrl-C or SIGTERM interrupts the run, which closes the servers and removes the temporary files
NodeRuntime.runMain(program)
