/**
 * The Effect-free part of the pg-terminate-claim fault (both editions' examples/faults/pgTerminateClaim.ts): its
 * sizes, what a terminated backend was doing, and the client's requests.
 */
export const ORDERS = 400
export const CONCURRENCY = 24
/** A claim whose answer was lost stays in progress for this long: short, so retries get through in the run. */
export const LEASE_MILLIS = 1500
/** The client gives an order up after this long (it then counts as lost). */
export const CLIENT_DEADLINE_MILLIS = 45_000

/** The terminator's pause between rounds (every other round locks the table first), in milliseconds. */
export const PAUSE_MILLIS = [100, 300] as const

/** The idempotency table of `serve --store postgres` (the store's default). */
export const TABLE = "effect_resilience_idempotency"

export const classify = (text: string): string => {
  const query = text.trim()
  return query.startsWith(`INSERT INTO "${TABLE}"`)
    ? "claim"
    : query.includes("SET state =")
    ? "complete"
    : query.includes("SET lease_until")
    ? "renew"
    : query.startsWith("DELETE")
    ? "release"
    : query.slice(0, 40)
}

export interface Attempt {
  readonly status: number | "client-timeout" | "network-error"
  readonly replayed: boolean
}

/** One attempt of a keyed POST, given up after `timeoutMillis`: its status (or why it has none). */
export const post = async (base: string, key: string, logical: string, timeoutMillis: number): Promise<Attempt> => {
  try {
    const response = await fetch(`${base}/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify({ sku: "FAULT-1", qty: 1, logical }),
      signal: AbortSignal.timeout(timeoutMillis)
    })
    await response.arrayBuffer()
    return { status: response.status, replayed: response.headers.get("idempotent-replayed") === "true" }
  } catch (error) {
    const timedOut = error instanceof Error && error.name === "TimeoutError"
    return { status: timedOut ? "client-timeout" : "network-error", replayed: false }
  }
}

/** The orders one server holds; none when it does not answer. */
export const listOrders = async (base: string): Promise<ReadonlyArray<{ readonly logical?: string }>> => {
  try {
    const response = await fetch(`${base}/orders`, { signal: AbortSignal.timeout(10_000) })
    return (await response.json()) as ReadonlyArray<{ readonly logical?: string }>
  } catch {
    return []
  }
}
