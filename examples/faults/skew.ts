/**
 * Fault "clock-skew": 2 `serve --store redis` processes share one Redis token bucket (capacity C, refill R
 * per second), one of them with its `Clock` 500 ms ahead (`--clock-skew 500`). Clients offer far more than
 * the limit to both for T seconds. Bound: admitted ≤ C + R·(T + skew).
 *
 * Why that bound: the bucket is a GCRA "full at" instant; an admission at real time t by a process whose
 * clock reads t + o moves it to max(fullAt, t + o) + 1/R and is allowed only while that is ≤ t + o + C/R.
 * The first of n admissions leaves fullAt ≥ t₁ + o_min + 1/R, each later one adds 1/R, and the last leaves
 * fullAt ≤ t_n + o_max + C/R: n ≤ C + R·(t_n − t₁ + o_max − o_min). A skewed clock lends at most R·skew
 * tokens, once; it does not refill the bucket faster.
 *
 * The skew is checked where it matters: the `fullAt` each process writes to Redis for a fresh key, against
 * the real time, shows how far ahead its limiter's clock is.
 */
import { Redis } from "ioredis"
import type { Fault, FaultRow } from "./fault.js"
import { type Answer, pool, postOnce, type PrivateRedis, type Served, startRedis, startServe } from "./support.js"

export interface SkewOptions {
  /** How far ahead the second process' clock runs, in milliseconds (default 500). */
  readonly skewMs?: number
  /** How long the load lasts, in milliseconds (default 4,000). */
  readonly loadMs?: number
  /** Capacity and refill per second of the shared bucket (default 10 and 20). */
  readonly capacity?: number
  readonly refillPerSecond?: number
  /** Concurrent clients (default 16). */
  readonly clients?: number
}

/**
 * The `fullAt` the process at `base` writes for a fresh customer's bucket, minus the real time: how far ahead
 * its limiter's clock runs, ± `uncertainty` (half the probe's round trip). The new bucket key is the one that
 * was not there before the probe.
 */
const measureSkew = async (
  redis: Redis,
  base: string,
  apiKey: string,
  refillPerSecond: number
): Promise<{ readonly skew: number; readonly uncertainty: number }> => {
  const known = new Set(await redis.keys("rl:tb:*"))
  const before = Date.now()
  const answer = await postOnce(base, 0, `probe-${apiKey}`, { probe: true }, { "x-api-key": apiKey })
  const after = Date.now()
  if (answer.status !== 201) throw new Error(`skew probe: ${answer.status} ${answer.body.slice(0, 200)}`)
  const fresh = (await redis.keys("rl:tb:*")).filter((k) => !known.has(k))
  if (fresh.length !== 1) throw new Error(`skew probe: expected one new bucket key, found ${fresh.length}`)
  const fullAt = Number(await redis.get(fresh[0]!))
  // a fresh bucket: fullAt = now + 1/R, at the process' now, somewhere between before and after
  return { skew: fullAt - 1000 / refillPerSecond - (before + after) / 2, uncertainty: (after - before) / 2 }
}

export const run = async (options: SkewOptions = {}): Promise<ReadonlyArray<FaultRow>> => {
  const skewMs = options.skewMs ?? 500
  const loadMs = options.loadMs ?? 4000
  const capacity = options.capacity ?? 10
  const refill = options.refillPerSecond ?? 20
  const clients = options.clients ?? 16
  const skews = [0, skewMs]
  let redis: PrivateRedis | undefined
  let client: Redis | undefined
  const servers: Array<Served> = []
  try {
    redis = await startRedis({ durable: false })
    const url = redis.url
    const keys = "faults-key=faults,probe-0=probe0,probe-1=probe1,warm=warm"
    servers.push(
      ...await Promise.all(skews.map((skew) =>
        startServe([
          "--store",
          "redis",
          "--redis-url",
          url,
          "--api-keys",
          keys,
          "--rate",
          `${capacity}:${refill}`,
          "--clock-skew",
          String(skew)
        ])
      ))
    )
    const bases = servers.map((s) => s.url)
    client = new Redis(url, { maxRetriesPerRequest: 1 })
    // warm each process up (its first request compiles the path), so the probes' round trips are short
    for (const base of bases) {
      await postOnce(base, 0, `warm-${Date.now()}`, { warm: true }, { "x-api-key": "warm" })
    }
    const measured = [
      await measureSkew(client, bases[0]!, "probe-0", refill),
      await measureSkew(client, bases[1]!, "probe-1", refill)
    ]
    const measuredSkew = measured[1]!.skew - measured[0]!.skew
    // the skew must really be there (within the probes' own latency), or the row proves nothing
    const skewApplied = Math.abs(measuredSkew - skewMs) <= 50 + measured[0]!.uncertainty + measured[1]!.uncertainty

    const run = Date.now().toString(36)
    let offered = 0
    let admitted = 0
    let denied = 0
    const others = new Map<number, number>()
    const count = (answer: Answer) => {
      last = Math.max(last, answer.at)
      if (answer.status === 201) admitted++
      else if (answer.status === 429) denied++
      else others.set(answer.status, (others.get(answer.status) ?? 0) + 1)
    }
    const started = performance.now()
    let last = started
    // the worst case for the bound: the process on time empties the bucket first, so the one ahead finds
    // it full again by its own clock (the tokens its skew lends), then both take all they can
    for (let i = 0;; i++) {
      offered++
      const answer = await postOnce(bases[0]!, 0, `sk-${run}-first-${i}`, { i }, { "x-api-key": "faults-key" })
      count(answer)
      if (answer.status !== 201) break
    }
    await pool(clients, clients, async (c) => {
      for (let i = 0; performance.now() - started < loadMs; i++) {
        const n = offered++
        const answer = await postOnce(bases[n % bases.length]!, n % bases.length, `sk-${run}-${c}-${i}`, { n }, {
          "x-api-key": "faults-key"
        })
        count(answer)
      }
    })
    const seconds = (last - started) / 1000
    const bound = capacity + refill * (seconds + skewMs / 1000)
    const unskewed = capacity + refill * seconds
    const ok = admitted <= bound && others.size === 0 && skewApplied
    const other = [...others].map(([s, n]) => `, ${s}×${n}`).join("")
    return [{
      fault: `Clock skew: 2 serve --store redis share a limiter, one ${skewMs} ms ahead`,
      offered,
      lost: 0,
      duplicated: 0,
      ok,
      notes:
        `admitted ${admitted} ≤ bound ${bound.toFixed(1)} = C ${capacity} + R ${refill}/s·(T ${
          seconds.toFixed(2)
        } s + skew ${skewMs / 1000} s)${admitted <= bound ? "" : " BROKEN"} (C + R·T = ${unskewed.toFixed(1)}); ` +
        `denied ${denied}${other}; skew measured in Redis ${Math.round(measuredSkew)} ms` +
        (skewApplied ? "" : " (NOT the skew asked for)")
    }]
  } finally {
    client?.disconnect()
    await Promise.all(servers.map((s) => s.stop()))
    await redis?.stop()
  }
}

export const clockSkew: Fault = { name: "clock-skew", run: () => run() }
