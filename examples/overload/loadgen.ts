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
}

const post = (agent: Agent, url: URL, timeoutMs: number, started: number, runStart: number): Promise<Outcome> =>
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
        "idempotency-key": randomUUID()
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
        while (pending.length < due) pending.push(post(agent, url, options.timeoutMs, performance.now(), runStart))
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
  /** p99 latency of the created orders, in milliseconds. */
  readonly p99Ms: number
}

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
    p99Ms: percentile(created.map((o) => o.latencyMs), 0.99) ?? NaN
  }
}
