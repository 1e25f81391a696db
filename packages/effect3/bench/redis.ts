/**
 * Issues #5 and #22: decisions/s of the Redis token bucket (`limiter.tryAcquire` through Effect, one
 * `EVALSHA` each) at concurrency 1 and 64, next to raw `EVALSHA` of the same script through ioredis
 * without Effect, on the same connection at the same concurrency: the engine's cost of a decision.
 * Target (#22): ≥ 0.9× of raw EVALSHA. Beside it, the Effect floor: the same raw call inside `Effect.async` and
 * nothing else, the least any Effect program pays for the call (at c=1, one suspend and resume of the fiber per
 * round trip). Where that floor is itself near or under 0.9× of raw, the target is out of reach for any Effect
 * client of the script, and the limiter's figure against the floor says what our layer adds on top.
 *
 * Raw ioredis `PING` is printed too, as the floor of one round trip. Issue #5 asked for 0.8× of it; the
 * script alone (raw EVALSHA) is well below that on this machine, so that target is out of reach for
 * any client of the script: it is reported, not judged.
 *
 * Fair by construction: both run on the one client (the same options: ioredis' defaults, no auto-pipelining),
 * with the same script, key and arguments, `concurrency` loops each sending its next call when the last one
 * answered. The reference is a plain `client.evalsha` per call, as a user of ioredis would send it: one write
 * syscall each. The store coalesces the writes of calls sent in the same tick (at most 16 to a `writev`, see
 * `docs/redis.md#throughput`), which is where it got the third back at c=64 — the syscalls, not the Effect
 * layer, were most of a call's cost. To show what that leaves of the Effect layer's own cost, the same pair
 * runs once more at c=64 on a second client with ioredis' `enableAutoPipelining` (ioredis then batches the
 * writes of both): reported, not judged, since it is another client configuration than the target's.
 *
 * Each case runs in rounds of 400 ms, interleaved (every other round in reverse order) after two warm-up rounds;
 * a judged pair's ratio is the median of its per-round ratios, since the two runs of one round see the same
 * round-trip time and this VM's drifts by tens of percent within a run.
 *
 * `REDIS_URL` (default `redis://127.0.0.1:6379`); without a reachable Redis it prints a note and skips.
 */
import { Effect } from "effect"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
import type { Redis } from "ioredis"
import { throughput } from "../../../bench/measure.js"
import { captureEvalsha, connect, rawScript } from "../../../bench/redis.js"
import type { Case } from "./harness.js"

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const TARGET = 0.9
const KEYS = 10_000
/** Measured rounds of 400 ms per case and concurrency (odd: the median is a round's). */
const ROUNDS = 7
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)

const prefix = `bench:${process.pid}:`
// a bucket that mostly allows (the common case); denials cost the same work
const params = { name: "bench", capacity: 1_000_000, refillPerSecond: 1_000_000 }

/** Everything is measured in `extra` (throughput needs concurrency, which the harness does not do). */
export const cases: ReadonlyArray<Case> = []

const name = {
  ping: (c: number) => `redis PING (c=${c})`,
  script: (c: number) => `redis raw EVALSHA token bucket (c=${c})`,
  limiter: (c: number) => `limiter.tryAcquire (redis, c=${c})`,
  scriptAuto: (c: number) => `redis raw EVALSHA, auto-pipelined (c=${c})`,
  limiterAuto: (c: number) => `limiter.tryAcquire, auto-pipelined (c=${c})`,
  floor: (c: number) => `raw EVALSHA in Effect.async, the Effect floor (c=${c})`
}

/** ≥ 0.9× of raw EVALSHA's throughput (the limiter's figure is the script's times the paired ratio: see `extra`). */
export const targets: ReadonlyArray<readonly [string, string, number, "throughput"]> = [1, 64].map((c) =>
  [name.limiter(c), name.script(c), TARGET, "throughput"] as const
)

/** `op`'s operations per second as one Effect program with `concurrency` fibers, each running it back to back. */
const inEffect = (
  concurrency: number,
  millis: number,
  op: (i: number) => Effect.Effect<unknown>
): Promise<number> =>
  Effect.runPromise(Effect.gen(function*() {
    let done = 0
    const start = process.hrtime.bigint()
    const end = start + BigInt(millis) * 1_000_000n
    yield* Effect.forEach(
      Array.from({ length: concurrency }, (_, w) => w),
      (w) =>
        Effect.gen(function*() {
          for (let i = w; process.hrtime.bigint() < end; i += concurrency) {
            yield* op(i)
            done++
          }
        }),
      { concurrency: "unbounded", discard: true }
    )
    return done / (Number(process.hrtime.bigint() - start) / 1e9)
  }))

const decisions = (l: RateLimiter.RateLimiter, concurrency: number, millis: number): Promise<number> =>
  inEffect(concurrency, millis, (i) => l.tryAcquire(keys[i % KEYS]!))

/**
 * The least any Effect program pays to make the same call: the raw call in `Effect.async`, resumed with its reply,
 * nothing else (no clock, key, decoding, timeout or metric). At c=1 a decision is one round trip in lockstep, so
 * what this costs over the raw call bounds from below what any Effect client of the script adds.
 */
const effectFloor = (raw: (i: number) => Promise<unknown>) => (i: number) =>
  Effect.async<unknown>((resume) => {
    raw(i).then((reply) => resume(Effect.succeed(reply)), (error) => resume(Effect.die(error)))
  })

const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

let skipped = false

const limiterOn = (client: Redis): Promise<RateLimiter.RateLimiter> =>
  Effect.runPromise(
    RateLimiter.tokenBucket(params).pipe(
      Effect.provide(RateLimiterStoreRedis.layer({ client, prefix })),
      Effect.scoped
    )
  )

/** Measures throughput at concurrency 1 and 64, as ns per operation (so `--json` has them too). */
export const extra = async (): Promise<Record<string, number>> => {
  const client = await connect()
  const auto = await connect(true)
  if (client === undefined || auto === undefined) {
    skipped = true
    client?.disconnect()
    auto?.disconnect()
    return {}
  }
  try {
    const limiter = await limiterOn(client)
    const limiterAuto = await limiterOn(auto)
    // the store's script as it sent it, read off the wire (the root's bench/redis.ts, shared with Effect 4)
    const captured = await captureEvalsha(client, () => Effect.runPromise(limiter.tryAcquire("sha-probe")))
    const raw = rawScript(client, captured, "sha-probe", keys)
    const rawAuto = rawScript(auto, captured, "sha-probe", keys)
    const out: Record<string, number> = {}
    for (const concurrency of [1, 64]) {
      // at c=1 there is nothing to batch: the auto-pipelined pair only runs at c=64
      const cases: Array<readonly [string, () => Promise<number>]> = [
        [name.ping(concurrency), () => throughput(concurrency, 400, () => client.ping())],
        [name.script(concurrency), () => throughput(concurrency, 400, raw)],
        [name.limiter(concurrency), () => decisions(limiter, concurrency, 400)],
        [name.floor(concurrency), () => inEffect(concurrency, 400, effectFloor(raw))],
        ...(concurrency === 1 ? [] : [
          [name.scriptAuto(concurrency), () => throughput(concurrency, 400, rawAuto)],
          [name.limiterAuto(concurrency), () => decisions(limiterAuto, concurrency, 400)]
        ] as const)
      ]
      // two warm-up rounds: after one, the first measured rounds of the limiter still ran slower (JIT, GC)
      for (let round = 0; round < 2; round++) for (const [, run] of cases) await run()
      // interleaved rounds, every other one in reverse order, so drift of the machine hits all alike and each
      // pair's two runs are next to each other in time
      const rates = cases.map(() => [] as Array<number>)
      for (let round = 0; round < ROUNDS; round++) {
        const order = [...cases.keys()]
        if (round % 2 === 1) order.reverse()
        for (const i of order) rates[i]!.push(await cases[i]![1]())
      }
      for (const [i, [caseName]] of cases.entries()) out[caseName] = 1e9 / median(rates[i]!)
      // a pair is judged by the median of its per-round ratios: a round's two runs share the machine's state of
      // that moment (this VM's round trip drifts by tens of percent over a run); the limiter's figure is the
      // reference's median times that ratio, so `--json` and the printed ratio say the same
      for (
        const [ours, reference] of [
          [name.limiter, name.script],
          [name.floor, name.script],
          [name.limiterAuto, name.scriptAuto]
        ] as const
      ) {
        const l = cases.findIndex(([n]) => n === ours(concurrency))
        const s = cases.findIndex(([n]) => n === reference(concurrency))
        if (l === -1 || s === -1) continue
        const paired = median(rates[l]!.map((rate, round) => rate / rates[s]![round]!))
        out[ours(concurrency)] = out[reference(concurrency)]! / paired
      }
    }
    // the bench keys expire on their own within two seconds (natural ttl plus the margin)
    return out
  } finally {
    await client.quit().catch(() => client.disconnect())
    await auto.quit().catch(() => auto.disconnect())
  }
}

const perSecond = (nsPerOp: number) => `${(1e6 / nsPerOp).toFixed(1)}k/s`

/** Printed after the cases (not with --json): the same figures as decisions per second. */
export const report = async (nsPerOp: ReadonlyMap<string, number>): Promise<void> => {
  if (skipped) {
    console.log(`
redis: no Redis at ${url} — skipped (set REDIS_URL or start redis-server)`)
    return
  }
  console.log(`
redis token bucket decisions/s vs raw EVALSHA of the same script (${url}; target ≥ ${TARGET}× of it):`)
  for (const c of [1, 64]) {
    const p = nsPerOp.get(name.ping(c))
    const s = nsPerOp.get(name.script(c))
    const l = nsPerOp.get(name.limiter(c))
    if (p === undefined || s === undefined || l === undefined) continue
    console.log(`  ${name.ping(c)}`.padEnd(56), perSecond(p).padStart(10))
    console.log(`  ${name.script(c)}`.padEnd(56), perSecond(s).padStart(10), ` ${(p / s).toFixed(2)}× of PING`)
    console.log(
      `  ${name.limiter(c)}`.padEnd(56),
      perSecond(l).padStart(10),
      ` ${(p / l).toFixed(2)}× of PING, ${(s / l).toFixed(2)}× of raw EVALSHA ${s / l >= TARGET ? "ok" : "MISSED"}`
    )
    const f = nsPerOp.get(name.floor(c))
    if (f !== undefined) {
      console.log(
        `  ${name.floor(c)}`.padEnd(56),
        perSecond(f).padStart(10),
        ` ${(s / f).toFixed(2)}× of raw EVALSHA: the most any Effect client of it can reach; the limiter is at ${
          (f / l).toFixed(2)
        }× of it`
      )
    }
    const sa = nsPerOp.get(name.scriptAuto(c))
    const la = nsPerOp.get(name.limiterAuto(c))
    if (sa === undefined || la === undefined) continue
    console.log(`  ${name.scriptAuto(c)}`.padEnd(56), perSecond(sa).padStart(10))
    console.log(
      `  ${name.limiterAuto(c)}`.padEnd(56),
      perSecond(la).padStart(10),
      ` ${(sa / la).toFixed(2)}× of it (not judged: ioredis batches both, this is the Effect layer's own cost)`
    )
  }
}
