/**
 * A bounded open-loop load generator for `POST /orders`: it sends a fixed number of requests at a fixed rate,
 * whatever the answers (a real crowd of callers does not wait for the server to be ready), each with its own
 * `Idempotency-Key`, and stops by itself when every request has an answer or has timed out.
 *
 * Real time and real sockets on purpose: this measures a real server process. Node's own `http` with one
 * keep-alive agent, so the generator's cost per request stays small next to the server's.
 */
import { randomUUID } from "node:crypto"
import { Agent, request } from "node:http"
import { percentile } from "../support/percentile.js"

export interface Outcome {
  /** The status, or 0 when the request had no answer within the timeout or failed on the network. */
  readonly status: number
  /** From sending to the end of the answer, in milliseconds. */
  readonly latencyMs: number
  /** When the answer came, in milliseconds since the run started. */
  readonly at: number
}

export interface OfferOptions {
  /** Requests per second. */
  readonly rate: number
  /** How long requests are offered; `rate × seconds` requests in all. */
  readonly seconds: number
  /** A request without an answer by then counts as failed (the client gave up). */
  readonly timeoutMs: number
  /** The share of requests, in [0, 1), sent without an `Idempotency-Key` (spread evenly). Default 0. */
  readonly fastShare?: number
}

/**
 * One `POST /orders`. Without `keyed`, it carries no `Idempotency-Key`: a fast 400, an answer that does little work
 * (as a 404, a 409 or a replay would).
 */
const post = (
  agent: Agent,
  url: URL,
  timeoutMs: number,
  started: number,
  runStart: number,
  keyed = true
): Promise<Outcome> =>
  new Promise((resolve) => {
    let done = false
    // the whole request, connection included, has `timeoutMs` (a socket timeout would only catch idle gaps)
    const timer = setTimeout(() => {
      req.destroy()
      finish(0)
    }, timeoutMs)
    const finish = (status: number) => {
      if (done) return
      done = true
      clearTimeout(timer)
      const end = performance.now()
      resolve({ status, latencyMs: end - started, at: end - runStart })
    }
    const body = JSON.stringify({ sku: "LOAD-1", qty: 1 })
    const req = request(url, {
      method: "POST",
      agent,
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        ...(keyed ? { "idempotency-key": randomUUID() } : {})
      }
    }, (res) => {
      res.resume()
      res.on("end", () => finish(res.statusCode ?? 0))
      res.on("error", () => finish(0))
    })
    req.on("error", () => finish(0))
    req.end(body)
  })

/** Offers `rate × seconds` requests to `base`/orders, spread evenly over `seconds`, and waits for every answer. */
export const offer = async (base: string, options: OfferOptions): Promise<ReadonlyArray<Outcome>> => {
  const url = new URL("/orders", base)
  const total = Math.round(options.rate * options.seconds)
  const agent = new Agent({ keepAlive: true, maxSockets: 4096 })
  const pending: Array<Promise<Outcome>> = []
  const runStart = performance.now()
  try {
    await new Promise<void>((resolve) => {
      // every tick sends what is due by now: the rate holds even when a tick comes late
      const tick = () => {
        const due = Math.min(total, Math.floor((performance.now() - runStart) / 1000 * options.rate) + 1)
        while (pending.length < due) {
          const fast = isFast(pending.length, options.fastShare ?? 0)
          pending.push(post(agent, url, options.timeoutMs, performance.now(), runStart, !fast))
        }
        if (pending.length >= total) resolve()
        else setTimeout(tick, 2)
      }
      tick()
    })
    return await Promise.all(pending)
  } finally {
    agent.destroy()
  }
}

/** Request i is fast when the running count of fast ones steps up: an even spread, no randomness. */
const isFast = (i: number, share: number): boolean => Math.floor((i + 1) * share) > Math.floor(i * share)

export interface ClosedLoopOptions {
  /** Callers, each sending its next request as soon as the last one is answered. */
  readonly lanes: number
  readonly seconds: number
  readonly timeoutMs: number
  /** The share of requests, in [0, 1), sent without an `Idempotency-Key` (spread evenly). Default 0. */
  readonly fastShare?: number
}

export interface LaneOutcome extends Outcome {
  /** Sent without an `Idempotency-Key`: a fast answer, not an order. */
  readonly fast: boolean
}

/**
 * A closed loop: `lanes` callers that each send the next `POST /orders` when the last one is answered, for `seconds`
 * (a lane's last request may end up to `timeoutMs` later). A refused request is answered at once, so refused lanes
 * ask again at once: a server at its limit sees far more requests than it admits, as behind a retrying fleet.
 */
export const closedLoop = async (base: string, options: ClosedLoopOptions): Promise<ReadonlyArray<LaneOutcome>> => {
  const url = new URL("/orders", base)
  const agent = new Agent({ keepAlive: true, maxSockets: options.lanes })
  const share = options.fastShare ?? 0
  const outcomes: Array<LaneOutcome> = []
  const runStart = performance.now()
  const end = runStart + options.seconds * 1000
  let sent = 0
  const lane = async () => {
    while (performance.now() < end) {
      const fast = isFast(sent++, share)
      const outcome = await post(agent, url, options.timeoutMs, performance.now(), runStart, !fast)
      outcomes.push({ ...outcome, fast })
    }
  }
  try {
    await Promise.all(Array.from({ length: options.lanes }, lane))
    return outcomes
  } finally {
    agent.destroy()
  }
}

/** One `POST /orders` without an `Idempotency-Key`: the server's fastest answer, a 400. */
export const fastAnswer = async (base: string, timeoutMs: number): Promise<Outcome> => {
  const agent = new Agent({ keepAlive: false })
  try {
    return await post(agent, new URL("/orders", base), timeoutMs, performance.now(), performance.now(), false)
  } finally {
    agent.destroy()
  }
}

/** Latencies of `count` requests sent one after another: the server's latency when nothing else runs. */
export const unloaded = async (base: string, count: number, timeoutMs: number): Promise<ReadonlyArray<Outcome>> => {
  const url = new URL("/orders", base)
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const outcomes: Array<Outcome> = []
  const runStart = performance.now()
  try {
    for (let i = 0; i < count; i++) outcomes.push(await post(agent, url, timeoutMs, performance.now(), runStart))
    return outcomes
  } finally {
    agent.destroy()
  }
}

export interface Summary {
  readonly offered: number
  readonly sent: number
  /** Created orders (201) per second, over the time from the first request to the last answer. */
  readonly goodput: number
  /** 201s over all requests. */
  readonly admitted: number
  /** Refused with 503 (shed) or 429 (rate limited). */
  readonly refused: number
  /** No answer in time, or a network error. */
  readonly failed: number
  /** Fast answers (400: no `Idempotency-Key`). */
  readonly fast: number
  /** p99 latency of the created orders, in milliseconds. */
  readonly p99Ms: number
  /**
   * The same after the first `learnMs` of the load (2 s): a shedder starting cold (limit 4) learns the limit in
   * that time, and its queue while it learns is no steady state.
   */
  readonly steadyP99Ms: number
}

/** How long a cold shedder has to learn before its latency counts as steady. */
export const learnMs = 2000

export const summarize = (outcomes: ReadonlyArray<Outcome>, offeredRate: number): Summary => {
  const created = outcomes.filter((o) => o.status === 201)
  const span = Math.max(...outcomes.map((o) => o.at)) / 1000
  return {
    offered: offeredRate,
    sent: outcomes.length,
    goodput: created.length / span,
    admitted: created.length,
    refused: outcomes.filter((o) => o.status === 503 || o.status === 429).length,
    failed: outcomes.filter((o) => o.status === 0).length,
    fast: outcomes.filter((o) => o.status === 400).length,
    p99Ms: percentile(created.map((o) => o.latencyMs), 0.99) ?? NaN,
    steadyP99Ms: percentile(created.filter((o) => o.at >= learnMs).map((o) => o.latencyMs), 0.99) ?? NaN
  }
}

/** A number with `digits` decimals, or "-" when it is not finite. */
export const fixed = (n: number, digits: number): string => Number.isFinite(n) ? n.toFixed(digits) : "-"

/** A plain-text table: the header and the rows, each cell right-aligned to its column. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((l) => l[i]!.length)))
  const format = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padStart(widths[i]!)).join("  ")
  return [format(header), ...rows.map(format)]
}
