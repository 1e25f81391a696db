/**
 * Fault "redis-kill": Redis SIGKILLed and restarted while 3 `serve --store redis` processes take 1,000 keyed
 * POSTs.
 *
 * - Its own Redis on a free port, durable (append-only file fsynced on every write): a store that forgot
 *   its records on restart could not keep any exactly-once promise (docs/reliability.md).
 * - 3 serve processes share it (idempotency keys and the rate limiter), one customer (`X-Api-Key`), lease
 *   3 s. Two run the Redis limiter failing open (`--rate-on-error allow`), one failing closed (`deny`, the
 *   default), so both policies meet the outage.
 * - 1,000 logical orders, each with its own Idempotency-Key and a unique `logicalId` in the body, sent by
 *   24 clients that retry each with the same key (to the next process) until a definitive 201.
 * - Once 40 % are done, Redis is SIGKILLed; the outage lasts until every process has refused at least one
 *   request and `outageMs` has passed; then Redis restarts on the same port from its append-only file.
 * - After the run, every order is sent once more (its answer lost in transit, say) after the lease has run
 *   out: it must be a replay of the same order, never a new one.
 *
 * `FAULTS_VERBOSE=1` prints its phases and the serve processes' logs to stderr.
 *
 * Checks: during the outage the fail-open processes answer 503 from the idempotency middleware and the
 * fail-closed one 503 from the limiter (its store is unavailable; no quota was used up), and no handler runs
 * (the orders counted by `GET /orders/count` do not move); after it, every logical order exists exactly once across the 3 processes (`GET /orders`).
 */
import type { Fault, FaultRow } from "./fault.js"
import {
  type Answer,
  getJson,
  lostAndDuplicated,
  pause,
  pool,
  postUntilDefinitive,
  type PrivateRedis,
  type Served,
  startRedis,
  startServe,
  until
} from "./support.js"

export interface RedisKillOptions {
  /** Logical orders (default 1,000). */
  readonly orders?: number
  /** Concurrent clients (default 24). */
  readonly clients?: number
  /** The shortest outage, in milliseconds (default 2,000). */
  readonly outageMs?: number
  /** The idempotency lease of the serve processes, in milliseconds (default 3,000). */
  readonly leaseMs?: number
  /**
   * Redis with an append-only file fsynced on every write (default `true`). `false` shows why: a Redis that
   * keeps nothing on disk restarts empty, and every order sent again after it runs a second time.
   */
  readonly durable?: boolean
}

const apiKey = "faults-key"
const headers = { "x-api-key": apiKey }
/** The problem type of the idempotency middleware's 503 (`storeUnavailable`). */
const storeUnavailable = "idempotency-store-unavailable"

const isStoreUnavailable = (answer: Answer) => answer.status === 503 && answer.body.includes(storeUnavailable)
/** The rate-limit middleware's 503 when its store cannot decide and fails closed (`storeUnavailableType`). */
const isLimiterUnavailable = (answer: Answer) =>
  answer.status === 503 && answer.body.includes("rate-limit-store-unavailable")

export const run = async (options: RedisKillOptions = {}): Promise<ReadonlyArray<FaultRow>> => {
  const total = options.orders ?? 1000
  const clients = options.clients ?? 24
  const outageMs = options.outageMs ?? 2000
  const leaseMs = options.leaseMs ?? 3000
  const onError = ["allow", "allow", "deny"] as const
  const t0 = performance.now()
  const phase = (what: string) => {
    if (process.env["FAULTS_VERBOSE"] !== undefined) {
      console.error(`redis-kill: ${what} at ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    }
  }
  let redis: PrivateRedis | undefined
  const servers: Array<Served> = []
  try {
    const durable = options.durable ?? true
    redis = await startRedis({ durable })
    const url = redis.url
    servers.push(
      ...await Promise.all(onError.map((policy) =>
        startServe([
          "--store",
          "redis",
          "--redis-url",
          url,
          "--api-keys",
          `${apiKey}=faults`,
          "--lease",
          String(leaseMs),
          "--rate",
          "100000:100000",
          "--rate-on-error",
          policy
        ])
      ))
    )
    phase("started")
    const bases = servers.map((s) => s.url)
    const run = Date.now().toString(36)
    const orders = Array.from({ length: total }, (_, i) => ({
      key: `rk-${run}-${i}`,
      body: { sku: "BOOK-1", qty: 1 + (i % 3), logicalId: `order-${run}-${i}` }
    }))
    const count = async () => {
      const counts = await Promise.all(bases.map((b) => getJson<{ count: number }>(`${b}/orders/count`, headers)))
      return counts.reduce((sum, c) => sum + c.count, 0)
    }

    // the outage: answers that arrived while Redis was down, per process
    let outage: "before" | "down" | "after" = "before"
    const during: Array<Answer> = []
    const statuses = new Map<number, number>()
    const seen = (answer: Answer) => {
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1)
      if (outage === "down") during.push(answer)
    }
    const firstIds = new Map<number, string>()
    let done = 0
    let attemptsTotal = 0

    const load = pool(total, clients, async (i) => {
      const order = orders[i]!
      const { answer, attempts } = await postUntilDefinitive(
        bases,
        i % bases.length,
        order.key,
        order.body,
        headers,
        seen
      )
      firstIds.set(i, (JSON.parse(answer.body) as { id: string }).id)
      attemptsTotal += attempts
      done++
    })
    const loadFailed = load.then(() => undefined, (error: unknown) => error)

    const fault = (async () => {
      await until("40 % of the orders done", () => done >= total * 0.4, { withinMs: 60_000 })
      phase("killing redis")
      await redis!.kill()
      outage = "down"
      const killedAt = performance.now()
      // the outage lasts at least outageMs, and until every process has refused a request as its limiter's
      // onError says (each saw the outage): 503 from the idempotency middleware when the limiter fails open,
      // 503 from the limiter when it fails closed
      await until(
        "every process refused a request during the outage",
        () =>
          bases.every((_, s) =>
            during.some((a) =>
              a.server === s && (onError[s] === "allow" ? isStoreUnavailable(a) : isLimiterUnavailable(a))
            )
          ),
        { withinMs: 30_000 }
      )
      const duringOutage = await count() // the handlers of claims taken before the kill have run by now
      await pause(Math.max(0, outageMs - (performance.now() - killedAt)))
      const atRestart = await count()
      await redis!.restart()
      outage = "after"
      phase("redis restarted")
      return { duringOutage, atRestart, outageMs: Math.round(performance.now() - killedAt) }
    })()

    const [loadError, outageFigures] = await Promise.all([loadFailed, fault])
    if (loadError !== undefined) throw loadError
    phase("all orders done")

    // every order again, its first answer lost in transit, after the lease of any claim left in progress
    await pause(leaseMs)
    let replays = 0
    let wrongReplays = 0
    await pool(total, clients, async (i) => {
      const order = orders[i]!
      const { answer } = await postUntilDefinitive(
        bases,
        (i + 1) % bases.length,
        order.key,
        order.body,
        headers,
        () => {}
      )
      const id = (JSON.parse(answer.body) as { id: string }).id
      if (answer.headers.get("idempotent-replayed") === "true" && id === firstIds.get(i)) replays++
      else wrongReplays++
    })

    phase("resent")
    // every logical order, across the 3 processes
    const lists = await Promise.all(
      bases.map((b) => getJson<ReadonlyArray<{ logicalId?: string }>>(`${b}/orders`, headers))
    )
    const found = lists.flat().map((o) => o.logicalId ?? "")
    const { duplicated, lost, unknown } = lostAndDuplicated(orders.map((o) => o.body.logicalId), found)

    const byPolicy = (policy: "allow" | "deny") => during.filter((a) => onError[a.server] === policy)
    const open = byPolicy("allow")
    const closed = byPolicy("deny")
    const open503 = open.filter(isStoreUnavailable).length
    const closed503 = closed.filter(isLimiterUnavailable).length
    /** The answers besides the expected refusal, by status: requests already past the store when it died. */
    const besides = (answers: ReadonlyArray<Answer>, expected: (a: Answer) => boolean) => {
      const byStatus = new Map<number, number>()
      for (const a of answers) if (!expected(a)) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1)
      return byStatus.size === 0 ? "" : `, besides ${[...byStatus].map(([st, n]) => `${st}×${n}`).join(" ")}`
    }
    // fail open: the limiter lets requests through and the idempotency middleware refuses them (503, the
    // handler not run); fail closed: the limiter refuses them first (503 + Retry-After). Requests already
    // past the limiter when Redis died may answer otherwise (201, 503), so only these are required.
    const policyKept = open503 > 0 && open.every((a) => a.status !== 429) && closed503 > 0
    const handlerRunsDuringOutage = outageFigures.atRestart - outageFigures.duringOutage
    const ok = policyKept && handlerRunsDuringOutage === 0 && wrongReplays === 0 && unknown === 0
    // answers of handlers that ran just before the kill, whose recording failed and was done again later
    const logs = servers.map((s) => s.output()).join("\n")
    if (process.env["FAULTS_VERBOSE"] !== undefined) console.error(logs)
    const recordFailed = logs.split("the store failed (complete)").length - 1
    const recordedLate = logs.split("answer was recorded at attempt").length - 1
    const recordRefused = logs.split("the store refused a handler's answer").length - 1
    const other = [...statuses].filter(([s]) => s !== 201).map(([s, n]) => `${s}×${n}`).join(" ")
    return [{
      fault: `Redis SIGKILLed + restarted (${durable ? "AOF fsync always" : "nothing on disk"}), 3 serve --store redis`,
      offered: total,
      lost,
      duplicated,
      ok,
      notes: `outage ${outageFigures.outageMs} ms: fail-open procs 503×${open503} (idempotency store unavailable, ` +
        `limiter onError allow${besides(open, isStoreUnavailable)}), fail-closed proc 503×${closed503} ` +
        `(rate-limit store unavailable, limiter onError deny${
          besides(closed, isLimiterUnavailable)
        }); handler runs during outage ${handlerRunsDuringOutage}; ` +
        `${attemptsTotal} attempts (${other || "no retries"}); answers recorded late ${recordedLate}/${recordFailed}` +
        (recordRefused > 0 ? ` (${recordRefused} refused: recorded already, taken over or gone)` : "") + "; " +
        `resent after the lease: ${replays} replays` +
        (wrongReplays > 0 ? `, ${wrongReplays} NOT replays` : "") + (unknown > 0 ? `; ${unknown} unknown orders` : "")
    }]
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
    await redis?.stop()
  }
}

export const redisKill: Fault = { name: "redis-kill", run: () => run() }
