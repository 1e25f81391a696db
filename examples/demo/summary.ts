/**
 * What the demo prints (both editions' `npm run demo`): the table, the reasons clients gave up, and a footer whose
 * every claim is derived from the numbers it sits under. No Effect here: each edition's report.ts adds how it
 * describes the library's errors in words.
 */
import type { Order } from "../support/ordersModel.js"
import { type Injected, rates, readTimeoutMillis } from "./pattern.js"

export const deadlineSeconds = 20

export interface Summary {
  readonly logical: number
  readonly attempts: number
  readonly retries: number
  readonly replays: number
  /** 429 answers received */
  readonly status429: number
  /** 429 answers after which the order's next attempt waited at least the answer's Retry-After */
  readonly honoured429: number
  /** how often the resilient client's circuit breaker opened (the naive client has none) */
  readonly breakerOpenings: number
  /** what the network did to this run's requests */
  readonly injected: Injected
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
  /** why the client gave up, in words, with how many orders */
  readonly gaveUpReasons: Readonly<Record<string, number>>
}

/** What crossed the wire, counted below any retry logic. */
export interface Counters {
  attempts: number
  replays: number
  status429: number
  /** 429 answers after which the order's next attempt waited at least the answer's Retry-After */
  honoured429: number
}

/** How one logical order ended, as its caller was told. */
export type Outcome =
  | { readonly created: true; readonly order: Order }
  | { readonly created: false; readonly reason: string }

/** A run's summary: what the clients were told (`outcomes`) against what the service created. */
export const summarize = (run: {
  readonly settings: { readonly orders: number }
  readonly counters: Counters
  readonly outcomes: ReadonlyMap<string, Outcome>
  readonly created: ReadonlyArray<Order>
  readonly breakerOpenings: number
  readonly injected: Injected
  readonly wallMs: number
}): Summary => {
  const inDb = new Map<string, number>()
  for (const order of run.created) inDb.set(String(order["ref"]), (inDb.get(String(order["ref"])) ?? 0) + 1)
  const reasons: Record<string, number> = {}
  let lost = 0
  let gaveUp = 0
  let gaveUpButCreated = 0
  for (const [ref, outcome] of run.outcomes) {
    if (outcome.created) {
      if ((inDb.get(ref) ?? 0) === 0) lost++
    } else {
      gaveUp++
      if ((inDb.get(ref) ?? 0) > 0) gaveUpButCreated++
      reasons[outcome.reason] = (reasons[outcome.reason] ?? 0) + 1
    }
  }
  return {
    logical: run.settings.orders,
    attempts: run.counters.attempts,
    retries: run.counters.attempts - run.settings.orders,
    replays: run.counters.replays,
    status429: run.counters.status429,
    honoured429: run.counters.honoured429,
    breakerOpenings: run.breakerOpenings,
    injected: run.injected,
    created: run.created.length,
    duplicates: run.created.length - inDb.size,
    lost,
    gaveUp,
    gaveUpButCreated,
    wallMs: run.wallMs,
    gaveUpReasons: reasons
  }
}

const statusWords: Readonly<Record<number, string>> = {
  409: "409: the same Idempotency-Key was still being processed",
  429: "429 Too Many Requests (the rate limiter)",
  500: "500 Internal Server Error",
  503: "503 Service Unavailable",
  504: "504 Gateway Timeout (the request's deadline passed on the server)"
}

export const status = (code: number) => statusWords[code] ?? `HTTP ${code}`

const percent = (p: number) => `${Math.round(p * 100)}%`

export const intro = (settings: { readonly orders: number; readonly clients: number; readonly seed: number }) =>
  wrap(
    `Placing ${settings.orders} logical orders from ${settings.clients} concurrent clients through an unreliable ` +
      `network: ${percent(rates.lostResponse)} of attempts lose their answer after the order was created, ` +
      `${percent(rates.unavailable)} get 503 + Retry-After, ${percent(rates.slow)} are slower than the ` +
      `${readTimeoutMillis / 1000} s read timeout; and a real rate limiter. Seed ${settings.seed}: the same seed ` +
      "meets the same faults.",
    ""
  )

const rows: ReadonlyArray<readonly [string, (s: Summary) => string | number]> = [
  ["logical orders", (s) => s.logical],
  ["HTTP attempts", (s) => s.attempts],
  ["retries", (s) => s.retries],
  ["answers lost after the order was created", (s) => s.injected.lostAfterCommit],
  ["503 + Retry-After from the network", (s) => s.injected.unavailable],
  [`answers slower than the ${readTimeoutMillis / 1000} s read timeout`, (s) => s.injected.slow],
  ["429 answers from the rate limiter", (s) => s.status429],
  ["  … retried no sooner than Retry-After", (s) => s.honoured429],
  ["replays served", (s) => s.replays],
  ["orders in the database", (s) => s.created],
  ["duplicates", (s) => s.duplicates],
  ["lost (reported created, missing)", (s) => s.lost],
  ["gave up (told the caller)", (s) => s.gaveUp],
  ["  … but the order exists", (s) => s.gaveUpButCreated],
  ["wall time", (s) => `${(s.wallMs / 1000).toFixed(1)} s`]
]

const labelWidth = Math.max(...rows.map(([label]) => label.length))

export const table = (naive: Summary, resilient: Summary) => {
  const lines = [`  ${"".padEnd(labelWidth)} ${"naive".padStart(10)} ${"resilient".padStart(10)}`]
  for (const [label, get] of rows) {
    lines.push(
      `  ${label.padEnd(labelWidth)} ${String(get(naive)).padStart(10)} ${String(get(resilient)).padStart(10)}`
    )
  }
  return lines.join("\n")
}

export const reasons = (who: string, summary: Summary): string =>
  summary.gaveUp === 0 ? "" : [
    `  the ${who} client gave up on ${plural(summary.gaveUp, "order")}:`,
    ...Object.entries(summary.gaveUpReasons)
      .sort(([, a], [, b]) => b - a)
      .map(([reason, n]) => `    ${String(n).padStart(4)} × ${reason}`)
  ].join("\n")

const plural = (n: number, word: string) =>
  n === 1 ? `${n} ${word}` : `${n} ${word.endsWith("y") ? `${word.slice(0, -1)}ie` : word}s`

/** Wraps a paragraph at `width` columns, indenting every line. */
const wrap = (text: string, indent: string, width = 100): string => {
  const lines: Array<string> = []
  let line = ""
  for (const word of text.split(" ")) {
    if (line !== "" && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line)
      line = word
    } else {
      line = line === "" ? word : `${line} ${word}`
    }
  }
  if (line !== "") lines.push(indent + line)
  return lines.join("\n")
}

const existAnyway = (who: string, n: number) =>
  `${who}: ${plural(n, "order")} it reported as failed ${n === 1 ? "exists" : "exist"} anyway.`

/** The moral of the run, claiming only what the numbers show. */
export const footer = (naive: Summary, resilient: Summary): string => {
  const lines: Array<string> = []
  const lostNaive = naive.injected.lostAfterCommit
  if (naive.duplicates > 0) {
    lines.push(
      `naive: ${plural(naive.duplicates, "duplicate order")}: it retried POSTs whose outcome it did not know ` +
        `(the network lost ${plural(lostNaive, "answer")} after the order was created) without a key, so the ` +
        "service placed those orders again."
    )
  } else if (lostNaive > 0) {
    lines.push(
      `naive: no duplicates this time: the network lost ${plural(lostNaive, "answer")} after the order was ` +
        "created, but no retry of those orders got through."
    )
  } else {
    lines.push("naive: no duplicates: the network lost no answer after an order was created this run.")
  }
  if (naive.gaveUpButCreated > 0) lines.push(existAnyway("naive", naive.gaveUpButCreated))
  if (resilient.duplicates === 0 && resilient.lost === 0) {
    lines.push(
      "resilient: no duplicates, nothing lost: every attempt of an order carried the order's Idempotency-Key, so " +
        `the service answered ${plural(resilient.replays, "retry")} with the stored response instead of placing ` +
        "the order again."
    )
  }
  if (resilient.duplicates > 0) {
    lines.push(
      `resilient: ${plural(resilient.duplicates, "duplicate order")} despite the Idempotency-Key: a bug, please ` +
        "report it with the seed."
    )
  }
  if (resilient.lost > 0) {
    lines.push(`resilient: ${plural(resilient.lost, "order")} reported created but missing: a bug, please report it.`)
  }
  if (resilient.gaveUpButCreated > 0) lines.push(existAnyway("resilient", resilient.gaveUpButCreated))
  if (resilient.breakerOpenings > 0) {
    lines.push(
      `The resilient client's circuit breaker opened ${plural(resilient.breakerOpenings, "time")} (half of its ` +
        "recent calls had failed): for a second each time, its calls failed fast without reaching the service."
    )
  }
  return lines.map((line) => wrap(line, "  ")).join("\n")
}
