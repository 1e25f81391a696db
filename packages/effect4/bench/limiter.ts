/**
 * Issue #3: `limiter.tryAcquire` on the memory store, through Effect (the harness cases) and as raw decisions of
 * the store's synchronous core (target ≥ 2M/s on one key, with the harness floor taken off); heap after 1M keys and
 * after they are evicted.
 */
import { Clock, Effect } from "effect"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStore from "effect-resilience/RateLimiterStore"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { median, type Suite } from "../../../bench/report.js"
import { type Case, measure } from "./harness.js"

const KEYS = 100_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)
const TARGET_PER_SECOND = 2_000_000

// a bucket that mostly allows (the common case); denials cost the same work
const params = { name: "bench", capacity: 1_000_000, refillPerSecond: 1_000_000 }
const limiter = Effect.runSync(
  RateLimiter.tokenBucket(params).pipe(
    Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory())
  )
)

export const cases: ReadonlyArray<Case> = [
  { name: "limiter.tryAcquire (memory, 1 key)", make: () => limiter.tryAcquire("user-1") },
  { name: "limiter.tryAcquire (memory, 100k keys)", make: (i) => limiter.tryAcquire(keys[i % KEYS]!) }
]

/** ns per raw decision of the store's synchronous core, without Effect. */
const rawNs = (pick: (i: number) => string, ops: number): number => {
  const sync = RateLimiterStore.unsafeMakeMemory().sync
  const p = { name: "raw", capacity: 1_000_000, refillPerSecond: 1_000_000 }
  let allowed = 0
  for (let i = 0; i < 200_000; i++) sync.tokenBucket(pick(i), 1, p, i) // warm-up
  const samples: Array<number> = []
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < ops; i++) if (sync.tokenBucket(pick(i), 1, p, 1_000_000 + i).allowed) allowed++
    samples.push(Number(process.hrtime.bigint() - start) / ops)
  }
  if (allowed === 0) throw new Error("nothing allowed")
  return median(samples)
}

const gc = (): (() => void) | undefined => {
  try {
    v8.setFlagsFromString("--expose-gc")
    return vm.runInNewContext("gc") as () => void
  } catch {
    return undefined
  }
}

const heapMb = (collect: (() => void) | undefined): number => {
  collect?.()
  collect?.()
  return process.memoryUsage().heapUsed / 1024 / 1024
}

/** Heap with 1M keys, then idle past their ttl (capacity / refill = 10 ms), then swept: lines for the table. */
const memoryNotes = async (): Promise<Array<string>> => {
  const collect = gc()
  const memory = RateLimiterStore.unsafeMakeMemory()
  const p = { name: "heap", capacity: 1, refillPerSecond: 100 }
  const before = heapMb(collect)
  // the Effect 4 store's time is the monotonic reading of the Clock, as the limiter passes it (and as
  // `evictExpired` reads it)
  const t0 = Effect.runSync(
    Clock.clockWith((clock) => Effect.succeed(Number(clock.monotonicTimeNanosUnsafe() / 1_000_000n)))
  )
  for (let i = 0; i < 1_000_000; i++) memory.sync.tokenBucket(`client-${i}`, 1, p, t0)
  const full = heapMb(collect)
  const keysHeld = memory.unsafeSize()
  await new Promise((resolve) => globalThis.setTimeout(resolve, 20))
  const sweepStart = process.hrtime.bigint()
  await Effect.runPromise(memory.evictExpired)
  const sweepMs = Number(process.hrtime.bigint() - sweepStart) / 1e6
  const after = heapMb(collect)
  const gcNote = collect === undefined ? " (no gc available: figures include garbage)" : ""
  return [
    `memory store heap${gcNote}: ${before.toFixed(1)} MB before, ${full.toFixed(1)} MB with ${
      keysHeld.toLocaleString("en")
    } keys (${((full - before) * 1024 * 1024 / keysHeld).toFixed(0)} B/key), ${
      after.toFixed(1)
    } MB after eviction (${memory.unsafeSize()} keys left, sweep ${sweepMs.toFixed(0)} ms)`
  ]
}

export const suite: Suite = {
  name: "limiter",
  run: async ({ floor }) => {
    const ns = await measure(cases)
    const raw1 = rawNs(() => "user-1", 2_000_000)
    const rawMany = rawNs((i) => keys[i % KEYS]!, 2_000_000)
    const one = ns["limiter.tryAcquire (memory, 1 key)"]!
    const own = 1e9 / Math.max(1, one - (floor ?? 0))
    return {
      cases: { ...ns, "store core, raw (1 key)": raw1, "store core, raw (100k keys)": rawMany },
      notes: [
        `decisions/s on one key minus the harness floor (Effect.succeed): ${(own / 1e6).toFixed(2)}M/s (target ≥ ${
          TARGET_PER_SECOND / 1e6
        }M/s) ${own >= TARGET_PER_SECOND ? "ok" : "MISSED"}; the store core raw: ${(1e3 / raw1).toFixed(2)}M/s ${
          1e9 / raw1 >= TARGET_PER_SECOND ? "ok" : "MISSED"
        }`,
        ...await memoryNotes()
      ]
    }
  }
}
