/**
 * Fault "redis-failover": a Redis Cluster master SIGKILLed under load while its replica takes over.
 *
 * - A Cluster of its own: 3 masters with one replica each (./cluster.ts), `cluster-node-timeout` 1 s.
 * - 2 replicas of a service (./failoverApp.ts) that use every Redis feature of the library on it: the Redis
 *   rate limiter (8 customers, one bucket each, spread over the masters; one replica fails closed, the
 *   other open), the idempotency middleware (lease 3 s), the fleet breaker around a healthy dependency, and
 *   a stream queue: each order sends a message, which the first replica consumes (idempotent consumer).
 * - The victim is the master of the stream's slot, and the breaker's name is chosen so its keys live there
 *   too: the kill takes the queue, the breaker's state, about a third of the buckets and of the idempotency
 *   keys.
 * - 400 logical orders (a key and a unique `logicalId` each) from 16 clients, each retried with the same key
 *   until a definitive 201. At 40 % the victim is SIGKILLed. The fault waits until a running node's view shows
 *   its replica serving the slots, then starts the victim again and waits until it has rejoined as a replica
 *   of the new master. After the run, and after the lease, every order is sent once more: a replay.
 *
 * Checks: every order exists exactly once across the 2 replicas; every order's message was handled exactly
 * once and the stream is empty; the resends are replays of the first answers; the breaker refused no call
 * (the dependency never failed). `FAULTS_VERBOSE=1` prints its phases and the replicas' logs to stderr.
 */
import type { Redis } from "ioredis"
import { ready, type RunningCluster, startCluster } from "./cluster.js"
import type { Fault, FaultRow } from "./fault.js"
import {
  type Answer,
  getJson,
  lostAndDuplicated,
  pause,
  pool,
  postUntilDefinitive,
  type Served,
  startServer,
  until
} from "./support.js"

export interface FailoverOptions {
  /** Logical orders (default 400). */
  readonly orders?: number
  /** Concurrent clients (default 16). */
  readonly clients?: number
  /** `cluster-node-timeout` (default 1,000 ms). */
  readonly nodeTimeoutMs?: number
  /** The idempotency lease of the service, in milliseconds (default 3,000). */
  readonly leaseMs?: number
  /** `waitReplicas` (1 replica, this timeout in ms) on the idempotency store and the queue's sends; default off. */
  readonly waitReplicasMs?: number
}

interface Stats {
  readonly breakerRefused: number
  readonly breakerFallbacks: number
  readonly sendFailed: number
  readonly deliveries: Record<string, number>
  readonly effects: Record<string, number>
}

/** What kind of refusal an answer is (the ones the fault expects while a master is missing). */
const kindOf = (answer: Answer): string =>
  answer.status === 0
    ? "no answer"
    : answer.status === 503 && answer.body.includes("idempotency-store-unavailable")
    ? "503 store"
    : answer.status === 503 && answer.body.includes("queue refused")
    ? "503 queue"
    : answer.status === 503 && answer.body.includes("breaker")
    ? "503 breaker"
    : String(answer.status)

const slotOf = async (client: Redis, key: string) => Number(await client.call("CLUSTER", "KEYSLOT", key))

/** A breaker name whose keys (`cb:{<name>}`) hash to a slot `port` serves. */
const breakerOn = async (cluster: RunningCluster, client: Redis, port: number, run: string) => {
  for (let i = 0; i < 1000; i++) {
    const name = `deps-${run}-${i}`
    if (await cluster.masterOf(await slotOf(client, `cb:{${name}}`)) === port) return name
  }
  throw new Error(`no breaker name on the master ${port}`)
}

export const run = async (options: FailoverOptions = {}): Promise<ReadonlyArray<FaultRow>> => {
  const total = options.orders ?? 400
  const clients = options.clients ?? 16
  const leaseMs = options.leaseMs ?? 3000
  const t0 = performance.now()
  const verbose = process.env["FAULTS_VERBOSE"] !== undefined
  const phase = (what: string) => {
    if (verbose) console.error(`redis-failover: ${what} at ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  }
  let cluster: RunningCluster | undefined
  const servers: Array<Served> = []
  try {
    cluster = await startCluster({ replicas: 1, nodeTimeoutMs: options.nodeTimeoutMs ?? 1000 })
    phase("cluster ready")
    const admin = cluster.node(cluster.masterPorts[0]!)
    const run = Date.now().toString(36)
    const stream = `failover-${run}`
    const slot = await slotOf(admin, stream)
    const victim = await cluster.masterOf(slot)
    const breaker = await breakerOn(cluster, admin, victim, run)
    const common = ["--nodes", cluster.ports.join(","), "--breaker", breaker, "--stream", stream]
    common.push("--lease", String(leaseMs))
    if (options.waitReplicasMs !== undefined) common.push("--wait-replicas", String(options.waitReplicasMs))
    const app = "examples/faults/failoverApp.ts"
    servers.push(
      ...await Promise.all([
        startServer(app, [...common, "--id", "a", "--rate-on-error", "deny", "--consume"]),
        startServer(app, [...common, "--id", "b", "--rate-on-error", "allow"])
      ])
    )
    phase("service ready")
    const bases = servers.map((s) => s.url)
    const orders = Array.from({ length: total }, (_, i) => ({
      key: `fo-${run}-${i}`,
      headers: { "x-api-key": `k${i % 8}` },
      body: { logicalId: `order-${run}-${i}` }
    }))

    let killedAt: number | undefined
    const refusals = new Map<string, number>()
    let lastRefusalAt = 0
    /** Every answer per order, as `<ms since the kill>:<server>:<kind>`, to explain a loss or a duplicate. */
    const history = new Map<number, Array<string>>()
    const seenFor = (i: number) => (answer: Answer) => {
      const at = killedAt === undefined ? "-" : Math.round(answer.at - killedAt)
      const list = history.get(i) ?? []
      list.push(`${at}:${answer.server}:${answer.status === 201 ? "201" : kindOf(answer)}`)
      history.set(i, list)
      seen(answer)
    }
    const seen = (answer: Answer) => {
      if (answer.status === 201 || killedAt === undefined) return
      const kind = kindOf(answer)
      refusals.set(kind, (refusals.get(kind) ?? 0) + 1)
      lastRefusalAt = Math.max(lastRefusalAt, answer.at)
    }
    const firstIds = new Map<number, string>()
    let done = 0
    let attempts = 0
    const load = pool(total, clients, async (i) => {
      const order = orders[i]!
      const result = await postUntilDefinitive(bases, i % 2, order.key, order.body, order.headers, seenFor(i))
      firstIds.set(i, (JSON.parse(result.answer.body) as { id: string }).id)
      attempts += result.attempts
      done++
    })
    const loadFailed = load.then(() => undefined, (error: unknown) => error)

    const fault = (async () => {
      await until("40 % of the orders done", () => done >= total * 0.4, { withinMs: 60_000 })
      phase(`killing master ${victim}`)
      await cluster!.kill(victim)
      killedAt = performance.now()
      // the replica serves the slots once a running node's view says so
      await until("the replica promoted", () => cluster!.masterOf(slot).then((p) => p !== victim, () => false), {
        withinMs: 30_000
      })
      const promotedMs = performance.now() - killedAt
      phase("replica promoted")
      await cluster!.restart(victim)
      await cluster!.healthy("the old master rejoined as a replica")
      phase("old master rejoined")
      return { promotedMs, rejoinedMs: performance.now() - killedAt }
    })()
    const [loadError, figures] = await Promise.all([loadFailed, fault])
    if (loadError !== undefined) throw loadError
    phase("all orders done")

    // the queue: every order's message handled, none left in the stream or pending
    const statsOf = () => Promise.all(bases.map((b) => getJson<Stats>(`${b}/stats`)))
    const logicalIds = orders.map((o) => o.body.logicalId)
    const client = await ready(cluster.connect())
    try {
      await until("every message handled and the stream empty", async () => {
        const [consumer] = await statsOf()
        const pending = await client.xpending(stream, "consumers") as [number, ...Array<unknown>]
        return logicalIds.every((id) => consumer!.effects[id] !== undefined) && await client.xlen(stream) === 0 &&
          Number(pending[0]) === 0
      }, { withinMs: 30_000 })
    } finally {
      client.disconnect()
    }

    // every order again, its first answer lost in transit, after the lease of any claim left in progress
    await pause(leaseMs)
    let replays = 0
    let wrongReplays = 0
    await pool(total, clients, async (i) => {
      const order = orders[i]!
      const { answer } = await postUntilDefinitive(bases, (i + 1) % 2, order.key, order.body, order.headers, () => {})
      const id = (JSON.parse(answer.body) as { id: string }).id
      if (answer.headers.get("idempotent-replayed") === "true" && id === firstIds.get(i)) replays++
      else wrongReplays++
    })
    phase("resent")

    const lists = await Promise.all(bases.map((b) => getJson<ReadonlyArray<string>>(`${b}/orders`)))
    const ordersFound = lostAndDuplicated(logicalIds, lists.flat())
    const stats = await statsOf()
    const consumer = stats[0]!
    const handled = Object.entries(consumer.effects).flatMap(([id, n]) => Array.from({ length: n }, () => id))
    const messages = lostAndDuplicated(logicalIds, handled)
    const redelivered = Object.values(consumer.deliveries).reduce((n, d) => n + d - 1, 0)
    const breakerRefused = stats.reduce((n, s) => n + s.breakerRefused, 0)
    const fallbacks = stats.map((s) => s.breakerFallbacks)
    const logs = servers.map((s) => s.output()).join("\n")
    if (verbose) console.error(logs)
    const recordFailed = logs.split("the store failed (complete)").length - 1
    const recordedLate = logs.split("answer was recorded at attempt").length - 1
    const recordRefused = logs.split("the store refused a handler's answer").length - 1
    const refusedFor = killedAt === undefined ? 0 : Math.max(0, lastRefusalAt - killedAt)
    /** The orders found more than once or never, with what their client saw. */
    const found = new Map<string, number>()
    for (const id of lists.flat()) found.set(id, (found.get(id) ?? 0) + 1)
    const odd = logicalIds.flatMap((id, i) =>
      (found.get(id) ?? 0) === 1 ? [] : [`${id} ×${found.get(id) ?? 0} [${(history.get(i) ?? []).join(" ")}]`]
    )
    const ok = breakerRefused === 0 && wrongReplays === 0 && ordersFound.unknown === 0 && messages.unknown === 0
    const refused = [...refusals].map(([kind, n]) => `${kind}×${n}`).join(" ") || "none"
    return [{
      fault: `Redis Cluster master SIGKILLed, its replica promoted (3+3, node timeout ${
        options.nodeTimeoutMs ?? 1000
      } ms${options.waitReplicasMs === undefined ? "" : `, waitReplicas ${options.waitReplicasMs} ms`})`,
      offered: total,
      lost: ordersFound.lost + messages.lost,
      duplicated: ordersFound.duplicated + messages.duplicated,
      ok,
      notes: `replica promoted ${Math.round(figures.promotedMs)} ms after the kill, old master back as its replica ` +
        `after ${Math.round(figures.rejoinedMs)} ms; refusals ${refused} (the last ${Math.round(refusedFor)} ms ` +
        `after the kill); ${attempts} attempts; answers recorded late ${recordedLate}/${recordFailed}` +
        (recordRefused > 0 ? ` (${recordRefused} refused: recorded already)` : "") +
        `; breaker refused ${breakerRefused}, fell back ${fallbacks.join("+")} times; ` +
        `queue: ${total - messages.lost - messages.duplicated} of ${total} messages handled once, ` +
        `${redelivered} redeliveries skipped, ` +
        `${stats.reduce((n, s) => n + s.sendFailed, 0)} sends failed (retried by the client); ` +
        `resent after the lease: ${replays} replays` + (wrongReplays > 0 ? `, ${wrongReplays} NOT replays` : "") +
        (ordersFound.unknown + messages.unknown > 0 ? `; ${ordersFound.unknown + messages.unknown} unknown ids` : "") +
        (odd.length > 0
          ? `; orders not found once (ms after the kill:server:answer): ${odd.slice(0, 5).join(", ")}`
          : "")
    }]
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
    await cluster?.stop()
  }
}

export const redisFailover: Fault = { name: "redis-failover", run: () => run() }
