/**
 * The demo's fault pattern (both editions' `npm run demo`): which fault a request meets is a pure function of the
 * seed and of the request — which client sent it, for which logical order, on which attempt — never of timing or
 * of the order in which concurrent requests arrive, so one seed tells the same story on every run. No Effect here.
 */
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

export const header = { client: "x-demo-client", order: "x-demo-order", attempt: "x-demo-attempt" } as const

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

/** Which orders each client places, in its order: client `c` gets every `clients`-th order from `c`. */
export const assignOrders = (orders: number, clients: number): ReadonlyArray<ReadonlyArray<string>> =>
  Array.from(
    { length: clients },
    (_, c) => Array.from({ length: Math.ceil(Math.max(0, orders - c) / clients) }, (_, k) => orderRef(c + k * clients))
  )

export const orderRef = (index: number) => `order-${String(index + 1).padStart(4, "0")}`
