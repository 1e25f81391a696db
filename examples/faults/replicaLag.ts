/**
 * How often a failover loses a write Redis acknowledged, and what `waitReplicas` (`WAIT`) changes.
 *
 * Redis replicates asynchronously: a master answers a write before its replica has it. A master that dies
 * in between takes the write with it, and the replica promoted in its place never had it. For the
 * idempotency store that is a claim or a completion gone (a retry then runs the handler again); for the
 * stream queue, a message its producer was told is enqueued.
 *
 * Each round, on a Cluster of 3 masters with one replica each: 32 writers claim and complete idempotency
 * keys (`IdempotencyStore/Redis`, keys spread over every master) and send messages to a stream
 * (`RedisStreamQueue`), each remembering what Redis acknowledged; the master of the round's stream is
 * SIGKILLed under that load; once its replica serves its slots and the writers' calls succeed again, every
 * acknowledged write is looked for. Then the old master is started again (it rejoins as a replica) for the
 * next round. With `stall`, the victim's replica is first stalled (`SIGSTOP`) and 48 MiB of other writes go to
 * its master — more than the kernel's socket buffers hold, so the replica is really behind — while the
 * writers go on; it resumes right after the kill: a replica behind its master when the master dies, as a
 * slow network or a busy replica makes it.
 *
 *   node --import tsx examples/faults/replicationLoss.ts [--kills 20] [--stall] [--wait-replicas <ms>]
 *
 * The `redis-replica-lag` fault of `npm run faults` runs two stalled rounds, without and with `waitReplicas`.
 *
 * Plain Node, for both editions: each passes its library's writes ({@link OpenWrites}); the Effect 3 edition's
 * are ./replicationLoss.ts, the Effect 4 edition's packages/effect4/examples/faults/replicationLoss.ts.
 */
import type { Cluster } from "ioredis"
import { ready, type RunningCluster, startCluster } from "./cluster.js"
import type { Fault, FaultRow } from "./fault.js"
import { until } from "./support.js"

export interface LossOptions {
  /** Rounds: one master killed in each (default 20). */
  readonly kills?: number
  /** Stall the victim's replica behind 48 MiB before the kill (default false). */
  readonly stall?: boolean
  /** `waitReplicas: { replicas: 1, timeout }` on the store and the queue, in ms; default off. */
  readonly waitReplicasMs?: number
  /** Concurrent writers (default 32). */
  readonly writers?: number
}

export interface LossFigures {
  readonly kills: number
  /** Rounds in which at least one acknowledged write was missing afterwards. */
  readonly killsWithLoss: number
  readonly acknowledged: { readonly claims: number; readonly completions: number; readonly sends: number }
  readonly lost: { readonly claims: number; readonly completions: number; readonly sends: number }
  /** Calls that failed (Redis down, or with `waitReplicas` too few replicas in time): never acknowledged. */
  readonly failed: number
  /** Of those, the ones `waitReplicas` refused: executed, but not replicated in time. */
  readonly notReplicated: number
  /** Kill to promotion (a running node's view shows the replica serving the slots), per round. */
  readonly promotedMs: ReadonlyArray<number>
}

/**
 * What a round writes through, from one edition's library: the idempotency store (`IdempotencyStore/Redis`) and a
 * stream queue's `send` (`RedisStreamQueue`) over the round's Cluster client, as promises.
 */
export interface LossWrites {
  /** Claims `key` (scope "loss", lease and TTL 1 hour): the result's tag, and its token when "Claimed". */
  readonly claim: (key: string) => Promise<{ readonly _tag: string; readonly token?: string }>
  /** Completes the owner's claim with a 201; false when the store refused it. */
  readonly complete: (key: string, token: string) => Promise<boolean>
  /** A stream queue on `stream` (visibility 1 minute, call deadline 2 s) and its send of one message. */
  readonly sender: (stream: string) => Promise<(id: string, body: number) => Promise<void>>
  readonly dispose: () => Promise<void>
}

/** One edition's {@link LossWrites} over `client`, with `waitReplicas` on the store and the queue when given. */
export type OpenWrites = (
  client: Cluster,
  waitReplicas: { readonly replicas: number; readonly timeout: number } | undefined
) => Promise<LossWrites>

const isNotReplicated = (error: unknown): boolean => String(error).includes("NotReplicated")

/** One round: load, kill, promotion, the check; the old master is back as a replica at the end. */
const round = async (
  cluster: RunningCluster,
  client: Cluster,
  writes: LossWrites,
  options: LossOptions,
  name: string
) => {
  const stream = `loss-${name}`
  const slot = Number(await client.cluster("KEYSLOT", stream))
  const victim = await cluster.masterOf(slot)
  const send = await writes.sender(stream)
  const claimed = new Map<string, string>() // key → token: the claim was acknowledged
  const completed = new Set<string>() // keys whose completion was acknowledged
  const sent = new Set<string>()
  let failed = 0
  let notReplicated = 0
  let afterPromotion = 0
  let promoted = false
  let stopped = false
  let n = 0
  const fail = (error: unknown) => {
    failed++
    if (isNotReplicated(error)) notReplicated++
  }
  const writer = async () => {
    while (!stopped) {
      const i = n++
      const key = `${name}-${i}`
      const work = i % 3 === 2
        ? send(key, i).then(() => void sent.add(key))
        : writes.claim(key).then(async (result) => {
          if (result._tag !== "Claimed" || result.token === undefined) throw new Error(`a fresh key was ${result._tag}`)
          claimed.set(key, result.token)
          const done = await writes.complete(key, result.token)
          if (!done) throw new Error("the owner's completion was refused")
          completed.add(key)
        })
      await work.then(() => {
        if (promoted) afterPromotion++
      }, async (error: unknown) => {
        fail(error)
        await new Promise((resolve) => setTimeout(resolve, 10))
      })
    }
  }
  const acknowledged = () => claimed.size + sent.size
  const writers = Array.from({ length: options.writers ?? 32 }, writer)
  let replica: number | undefined
  try {
    await until("writes acknowledged before the kill", () => acknowledged() >= 600)
    if (options.stall === true) {
      const view = await cluster.view()
      const victimId = view.find((node) => node.port === victim)!.id
      replica = view.find((node) => node.masterId === victimId)!.port
      cluster.signal(replica, "SIGSTOP")
      // other writes on the victim, more than the kernel buffers between it and its stalled replica
      await client.set(`{${stream}}:filler`, Buffer.alloc(48 * 1024 * 1024, 1))
      const before = acknowledged()
      await until(
        "writes acknowledged while the replica is stalled",
        () => acknowledged() >= before + 300 || failed >= 300
      )
    }
    const killedAt = performance.now()
    await cluster.kill(victim)
    if (replica !== undefined) cluster.signal(replica, "SIGCONT")
    await until("the replica promoted", () => cluster.masterOf(slot).then((port) => port !== victim, () => false))
    const promotedMs = performance.now() - killedAt
    promoted = true
    // the old master started again, as an operator (or an orchestrator) would: it rejoins as the replica
    // of the promoted one, which until then has none — with waitReplicas, no write on its slots succeeds
    await cluster.restart(victim)
    await cluster.healthy("the old master rejoined as a replica")
    // the writers' calls succeed again, on the victim's slots too (a third of the writes are its stream's)
    await until("writes acknowledged after the promotion", () => afterPromotion >= 600)
    stopped = true
    await Promise.all(writers)

    // every acknowledged write, looked for on the cluster as it is now
    let lostClaims = 0
    let lostCompletions = 0
    for (const key of claimed.keys()) {
      const now = await writes.claim(key)
      if (now._tag === "Claimed") lostClaims++
      else if (completed.has(key) && now._tag !== "Completed") lostCompletions++
    }
    const ids = new Set<string>()
    let cursor = "-"
    for (;;) {
      const page = await client.xrange(stream, cursor, "+", "COUNT", 1000)
      for (const [, fields] of page) ids.add(fields[fields.indexOf("id") + 1]!)
      if (page.length < 1000) break
      cursor = `(${page[page.length - 1]![0]}`
    }
    const lostSends = [...sent].filter((id) => !ids.has(id)).length
    await client.del(stream, `{${stream}}:filler`)
    return {
      promotedMs,
      acknowledged: { claims: claimed.size, completions: completed.size, sends: sent.size },
      lost: { claims: lostClaims, completions: lostCompletions, sends: lostSends },
      failed,
      notReplicated
    }
  } finally {
    stopped = true
    if (replica !== undefined) cluster.signal(replica, "SIGCONT")
  }
}

/** Runs the rounds on `on` (a Cluster with one replica per master, left running), or on a Cluster of its own. */
export const measure = async (
  open: OpenWrites,
  options: LossOptions = {},
  on?: RunningCluster
): Promise<LossFigures> => {
  const kills = options.kills ?? 20
  const cluster = on ?? await startCluster({ replicas: 1, nodeTimeoutMs: 1000 })
  const client = await ready(cluster.connect())
  const writes = await open(
    client,
    options.waitReplicasMs === undefined ? undefined : { replicas: 1, timeout: options.waitReplicasMs }
  )
  try {
    const run = Date.now().toString(36)
    const totals = {
      acknowledged: { claims: 0, completions: 0, sends: 0 },
      lost: { claims: 0, completions: 0, sends: 0 },
      failed: 0,
      notReplicated: 0,
      killsWithLoss: 0,
      promotedMs: [] as Array<number>
    }
    for (let k = 0; k < kills; k++) {
      const r = await round(cluster, client, writes, options, `${run}-${k}`)
      for (const what of ["claims", "completions", "sends"] as const) {
        totals.acknowledged[what] += r.acknowledged[what]
        totals.lost[what] += r.lost[what]
      }
      totals.failed += r.failed
      totals.notReplicated += r.notReplicated
      totals.promotedMs.push(Math.round(r.promotedMs))
      if (r.lost.claims + r.lost.completions + r.lost.sends > 0) totals.killsWithLoss++
      if (process.env["FAULTS_VERBOSE"] !== undefined) console.error(`round ${k + 1}/${kills}: ${JSON.stringify(r)}`)
    }
    return { kills, ...totals }
  } finally {
    await writes.dispose()
    client.disconnect()
    if (on === undefined) await cluster.stop()
  }
}

const lostOf = (f: LossFigures) => f.lost.claims + f.lost.completions + f.lost.sends

/** One line of figures: what was acknowledged, what of it was lost, in how many of the kills. */
export const describe = (f: LossFigures): string =>
  `${f.kills} kills, ${f.killsWithLoss} with a loss; acknowledged claims ${f.acknowledged.claims}, completions ` +
  `${f.acknowledged.completions}, sends ${f.acknowledged.sends}; lost ${f.lost.claims}, ${f.lost.completions}, ` +
  `${f.lost.sends}; ${f.failed} calls failed (${f.notReplicated} not replicated in time); promoted after ` +
  `${f.promotedMs.join("/")} ms`

/**
 * Fault "redis-replica-lag": a stalled replica's master killed, once without and once with `waitReplicas`.
 * Without it the writes acknowledged while the replica was behind are lost (the fault checks that some
 * are: the lag was real); with it none is, and the ones the replica did not have were refused instead.
 */
export const replicaLagFault = (open: OpenWrites): Fault => ({
  name: "redis-replica-lag",
  run: async () => {
    const cluster = await startCluster({ replicas: 1, nodeTimeoutMs: 1000 })
    const [without, withWait] = await (async () => {
      try {
        return [
          await measure(open, { kills: 1, stall: true }, cluster),
          await measure(open, { kills: 1, stall: true, waitReplicasMs: 100 }, cluster)
        ]
      } finally {
        await cluster.stop()
      }
    })()
    const row: FaultRow = {
      fault: "Redis Cluster master SIGKILLed while its replica lags, with waitReplicas 100 ms (1 replica)",
      offered: withWait.acknowledged.claims + withWait.acknowledged.sends,
      lost: lostOf(withWait),
      duplicated: 0,
      ok: lostOf(without) > 0 && withWait.notReplicated > 0,
      notes: `with waitReplicas: ${describe(withWait)} — without: ${describe(without)}`
    }
    return [row]
  }
})

/** The command line of examples/faults/replicationLoss.ts, over one edition's writes. */
export const lossCli = async (open: OpenWrites): Promise<never> => {
  const argv = process.argv.slice(2)
  const at = (name: string) => argv.indexOf(`--${name}`)
  const kills = at("kills") === -1 ? 20 : Number(argv[at("kills") + 1])
  const waitMs = at("wait-replicas") === -1 ? undefined : Number(argv[at("wait-replicas") + 1])
  const figures = await measure(open, {
    kills,
    stall: argv.includes("--stall"),
    ...(waitMs === undefined ? {} : { waitReplicasMs: waitMs })
  })
  console.log(describe(figures))
  console.log(JSON.stringify(figures))
  return process.exit(0)
}
