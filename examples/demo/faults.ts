/**
 * The demo's unreliable network. Which fault a request meets is a pure function of the seed and of the
 * request — which client sent it, for which logical order, on which attempt — never of timing or of the
 * order in which concurrent requests arrive, so one seed tells the same story on every run.
 *
 * The client side names each request in three headers (`x-demo-client`, `x-demo-order`, `x-demo-attempt`);
 * the server side looks the fault up and applies it with the library's `Chaos` middleware.
 */
import { type HttpApp, HttpClient, HttpClientRequest, HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import * as Chaos from "effect-resilience/Chaos"

export type Fault = "none" | "lost-response" | "unavailable" | "slow"

/** One HTTP attempt as the network sees it. `attempt` counts from 1 per logical order. */
export interface Attempt {
  readonly client: number
  readonly order: string
  readonly attempt: number
}

/** The share of attempts meeting each fault (the rest meet none). */
export const rates = { lostResponse: 0.08, unavailable: 0.05, slow: 0.04 } as const

/** The clients' read timeout, and how late a slow answer is (longer, so it never arrives in time). */
export const readTimeoutMillis = 1000
export const slowMillis = 1500

/** FNV-1a over UTF-16 code units, then a murmur3 finaliser so nearby inputs spread over the whole range. */
const hash32 = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** The fault `request` meets under `seed`. */
export const faultFor = (seed: number, request: Attempt): Fault => {
  const u = hash32(`${seed}|${request.client}|${request.order}|${request.attempt}`) / 2 ** 32
  if (u < rates.lostResponse) return "lost-response"
  if (u < rates.lostResponse + rates.unavailable) return "unavailable"
  if (u < rates.lostResponse + rates.unavailable + rates.slow) return "slow"
  return "none"
}

const header = { client: "x-demo-client", order: "x-demo-order", attempt: "x-demo-attempt" } as const

/** Names a logical order's request: the client transform below adds the attempt number. */
export const forOrder = (client: number, order: string) => (request: HttpClientRequest.HttpClientRequest) =>
  HttpClientRequest.setHeaders(request, { [header.client]: String(client), [header.order]: order })

/**
 * Numbers the attempts of each logical order as they go on the wire (below any retry logic). The attempts
 * of one order are sequential — one client places it — so the numbering does not depend on timing.
 */
export const numberAttempts = (client: HttpClient.HttpClient): HttpClient.HttpClient => {
  const attempts = new Map<string, number>()
  return HttpClient.mapRequest(client, (request) => {
    const order = request.headers[header.order]
    if (order === undefined) return request
    const attempt = (attempts.get(order) ?? 0) + 1
    attempts.set(order, attempt)
    return HttpClientRequest.setHeader(request, header.attempt, String(attempt))
  })
}

/** Reads the request's identity back from its headers; `undefined` for requests the demo did not name. */
export const attemptOf = (headers: Readonly<Record<string, string | undefined>>): Attempt | undefined => {
  const client = Number(headers[header.client])
  const order = headers[header.order]
  const attempt = Number(headers[header.attempt])
  return Number.isInteger(client) && order !== undefined && Number.isInteger(attempt)
    ? { client, order, attempt }
    : undefined
}

/** What the network did, counted as it did it. */
export interface Injected {
  /** 201 answers to a request that created an order, dropped after the commit (replays not counted). */
  lostAfterCommit: number
  /** every answer dropped (also replays, 409s and 429s) */
  lost: number
  unavailable: number
  slow: number
}

const lose = Chaos.middleware({ lostResponse: { probability: 1 } })
const unavailable = Chaos.middleware({ errorResponse: { probability: 1, status: 503, retryAfter: "1 second" } })
const slow = Chaos.middleware({ latency: { probability: 1, delay: slowMillis } })

/** The server side: a middleware applying each named request's fault, and what it injected. */
export const network = (seed: number) => {
  const injected: Injected = { lostAfterCommit: 0, lost: 0, unavailable: 0, slow: 0 }
  const middleware = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      const attempt = attemptOf(request.headers)
      const fault = attempt === undefined ? "none" : faultFor(seed, attempt)
      switch (fault) {
        case "none":
          return app
        case "lost-response":
          return Effect.tap(lose(app), (response) =>
            Effect.sync(() => {
              injected.lost++
              if (response.status === 201 && response.headers["idempotent-replayed"] !== "true") {
                injected.lostAfterCommit++
              }
            }))
        case "unavailable":
          return Effect.zipLeft(unavailable(app), Effect.sync(() => injected.unavailable++))
        case "slow":
          return Effect.zipRight(Effect.sync(() => injected.slow++), slow(app))
      }
    })
  return { middleware, injected: (): Readonly<Injected> => ({ ...injected }) }
}
