/**
 * Issues #5 and #22: decisions/s of the Redis token bucket (`limiter.tryAcquire` through Effect, one `EVALSHA` each)
 * at concurrency 1 and 64, against raw `EVALSHA` of the same script through ioredis without Effect, on the same
 * connection at the same concurrency (target ≥ 0.9× of it). Beside them, reported and not judged: raw `PING` (one
 * round trip), the Effect floor (the raw call inside `Effect.callback` and nothing else: the least any Effect client
 * of the script pays), and at c=64 the same pair on a client with ioredis' `enableAutoPipelining`.
 *
 * Each case runs in rounds of 400 ms, interleaved (every other round in reverse order) after two warm-up rounds; a
 * pair's ratio is the median of its per-round ratios, since the two runs of one round see the same round-trip time.
 * The raw side is the root's `bench/redis.ts`, the same for both editions. `REDIS_URL` (default
 * `redis://127.0.0.1:6379`); without a reachable Redis the suite is skipped with a note.
 */
import { Effect } from "effect"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
import type { Redis } from "ioredis"
import { interleaved, pairedRatio, throughput } from "../../../bench/measure.js"
import { captureEvalsha, connect, rawScript, redisUrl } from "../../../bench/redis.js"
import { type Comparison, median, type Suite } from "../../../bench/report.js"
import { inEffect } from "./harness.js"

const TARGET = 0.9
const KEYS = 10_000
/** Measured rounds of 400 ms per case and concurrency (odd: the median is a round's). */
const ROUNDS = 7
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)
const prefix = `bench:${process.pid}:`
// a bucket that mostly allows (the common case); denials cost the same work
const params = { name: "bench", capacity: 1_000_000, refillPerSecond: 1_000_000 }

const name = {
  ping: (c: number) => `redis PING (c=${c})`,
  script: (c: number) => `redis raw EVALSHA token bucket (c=${c})`,
  limiter: (c: number) => `limiter.tryAcquire (redis, c=${c})`,
  floor: (c: number) => `raw EVALSHA in Effect.callback, the Effect floor (c=${c})`,
  scriptAuto: (c: number) => `redis raw EVALSHA, auto-pipelined (c=${c})`,
  limiterAuto: (c: number) => `limiter.tryAcquire, auto-pipelined (c=${c})`
}

const limiterOn = (client: Redis): Promise<RateLimiter.RateLimiter> =>
  Effect.runPromise(
    RateLimiter.tokenBucket(params).pipe(Effect.provide(RateLimiterStoreRedis.layer({ client, prefix })))
  )

/** The raw call in `Effect.callback`, resumed with its reply, nothing else. */
const effectFloor = (raw: (i: number) => Promise<unknown>) => (i: number) =>
  Effect.callback<unknown>((resume) => {
    raw(i).then((reply) => resume(Effect.succeed(reply)), (error) => resume(Effect.die(error)))
  })

export const suite: Suite = {
  name: "redis",
  run: async () => {
    const client = await connect()
    const auto = await connect(true)
    if (client === undefined || auto === undefined) {
      client?.disconnect()
      auto?.disconnect()
      return { cases: {}, notes: [`no Redis at ${redisUrl()}: skipped (set REDIS_URL or start redis-server)`] }
    }
    try {
      const limiter = await limiterOn(client)
      const limiterAuto = await limiterOn(auto)
      const captured = await captureEvalsha(client, () => Effect.runPromise(limiter.tryAcquire("sha-probe")))
      const raw = rawScript(client, captured, "sha-probe", keys)
      const rawAuto = rawScript(auto, captured, "sha-probe", keys)
      const decisions = (l: RateLimiter.RateLimiter, c: number) =>
        inEffect(c, 400, (i) => l.tryAcquire(keys[i % KEYS]!))
      const out: Record<string, number> = {}
      const comparisons: Array<Comparison> = []
      for (const concurrency of [1, 64]) {
        // at c=1 there is nothing to batch: the auto-pipelined pair only runs at c=64
        const cases: Array<readonly [string, () => Promise<number>]> = [
          [name.ping(concurrency), () => throughput(concurrency, 400, () => client.ping())],
          [name.script(concurrency), () => throughput(concurrency, 400, raw)],
          [name.limiter(concurrency), () => decisions(limiter, concurrency)],
          [name.floor(concurrency), () => inEffect(concurrency, 400, effectFloor(raw))],
          ...(concurrency === 1 ? [] : [
            [name.scriptAuto(concurrency), () => throughput(concurrency, 400, rawAuto)],
            [name.limiterAuto(concurrency), () => decisions(limiterAuto, concurrency)]
          ] as const)
        ]
        const rates = await interleaved(cases.map(([, run]) => run), ROUNDS, 2)
        for (const [i, [caseName]] of cases.entries()) out[caseName] = 1e9 / median(rates[i]!)
        const at = (n: string) => cases.findIndex(([caseName]) => caseName === n)
        for (
          const [ours, reference, target] of [
            [name.limiter, name.script, { atLeast: TARGET }],
            [name.floor, name.script, undefined],
            [name.limiterAuto, name.scriptAuto, undefined]
          ] as const
        ) {
          const l = at(ours(concurrency))
          const s = at(reference(concurrency))
          if (l === -1 || s === -1) continue
          const ratio = pairedRatio(rates[l]!, rates[s]!)
          // the case's figure is the reference's median times the paired ratio: the table and the ratio agree
          out[ours(concurrency)] = out[reference(concurrency)]! / ratio
          comparisons.push({
            case: ours(concurrency),
            baseline: reference(concurrency),
            kind: "throughput",
            ratio,
            ...(target === undefined ? {} : { target }),
            note: "median of per-round ratios (rounds interleaved)"
          })
        }
      }
      return { cases: out, comparisons }
    } finally {
      // the bench keys expire on their own within two seconds (natural ttl plus the margin)
      await client.quit().catch(() => client.disconnect())
      await auto.quit().catch(() => auto.disconnect())
    }
  }
}
