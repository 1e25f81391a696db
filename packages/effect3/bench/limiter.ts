/**
 * Issue #3: `limiter.tryAcquire` on the memory store, through Effect (the harness cases) and as raw
 * decisions of the store's synchronous core; heap after 1M keys and after they are evicted.
 */
import { Effect } from "effect"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStore from "effect-resilience/RateLimiterStore"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { type Case, fmt } from "./harness.js"

const KEYS = 100_000
const keys = Array.from({ length: KEYS }, (_, i) => `user-${i}`)

// a bucket that mostly allows (the common case); denials cost the same work
const params = { name: "bench", capacity: 1_000_000, refillPerSecond: 1_000_000 }
const store = RateLimiterStore.unsafeMakeMemory()
const limiter = Effect.runSync(
  RateLimiter.tokenBucket(params).pipe(
    Effect.provideService(RateLimiterStore.RateLimiterStore, store),
    Effect.scoped
  )
)

export const cases: ReadonlyArray<Case> = [
  { name: "limiter.tryAcquire (memory, 1 key)", make: () => limiter.tryAcquire("user-1") },
  { name: "limiter.tryAcquire (memory, 100k keys)", make: (i) => limiter.tryAcquire(keys[i % KEYS]!) }
]

/** [case, reference, target ratio of overheads over the baseline]: the limiter's target is absolute (see report). */
export const targets: ReadonlyArray<readonly [string, string, number]> = []

const TARGET_PER_SECOND = 2_000_000

const rawPerSecond = (pick: (i: number) => string, ops: number): number => {
  const sync = RateLimiterStore.unsafeMakeMemory().sync
  const p = { name: "raw", capacity: 1_000_000, refillPerSecond: 1_000_000 }
  let allowed = 0
  for (let i = 0; i < 200_000; i++) sync.tokenBucket(pick(i), 1, p, i) // warm-up
  const samples: Array<number> = []
  for (let round = 0; round < 5; round++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < ops; i++) if (sync.tokenBucket(pick(i), 1, p, 1_000_000 + i).allowed) allowed++
    samples.push(ops / (Number(process.hrtime.bigint() - start) / 1e9))
  }
  if (allowed === 0) throw new Error("nothing allowed")
  return samples.sort((a, b) => a - b)[2]!
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

const perSecond = (n: number) => `${(n / 1e6).toFixed(2)}M/s`

/** Printed after the cases (not with --json). */
export const report = async (nsPerOp: ReadonlyMap<string, number>): Promise<void> => {
  // the harness runs every op as its own effect: Effect.succeed is the floor nothing can go below
  const floor = nsPerOp.get("Effect.succeed") ?? 0
  console.log(`\nrate limiter decisions/s (target ≥ 2M/s on one key; harness floor Effect.succeed ${fmt(floor)}/op):`)
  for (const c of cases) {
    const ns = nsPerOp.get(c.name)
    if (ns === undefined) continue
    console.log(`  ${c.name} via Effect`.padEnd(56), perSecond(1e9 / ns).padStart(10))
    const own = 1e9 / Math.max(1, ns - floor)
    const verdict = c.name.includes("1 key") ? (own >= TARGET_PER_SECOND ? " ok" : " MISSED") : ""
    console.log(`  ${c.name} minus the floor`.padEnd(56), perSecond(own).padStart(10), verdict)
  }
  const raw1 = rawPerSecond(() => "user-1", 2_000_000)
  console.log(
    "  store core, raw (1 key)".padEnd(56),
    perSecond(raw1).padStart(10),
    raw1 >= TARGET_PER_SECOND ? " ok" : " MISSED"
  )
  console.log(
    "  store core, raw (100k keys)".padEnd(56),
    perSecond(rawPerSecond((i) => keys[i % KEYS]!, 2_000_000)).padStart(10)
  )

  // memory: 1M keys, then idle past their ttl (capacity / refill = 10 ms), then swept
  const collect = gc()
  const memory = RateLimiterStore.unsafeMakeMemory()
  const p = { name: "heap", capacity: 1, refillPerSecond: 100 }
  const before = heapMb(collect)
  const t0 = Date.now()
  for (let i = 0; i < 1_000_000; i++) memory.sync.tokenBucket(`client-${i}`, 1, p, t0)
  const full = heapMb(collect)
  const keysHeld = memory.unsafeSize()
  await new Promise((resolve) => setTimeout(resolve, 20))
  const sweepStart = process.hrtime.bigint()
  await Effect.runPromise(memory.evictExpired)
  const sweepMs = Number(process.hrtime.bigint() - sweepStart) / 1e6
  const after = heapMb(collect)
  const note = collect === undefined ? " (no gc available: figures include garbage)" : ""
  console.log(`\nrate limiter memory${note}:`)
  console.log(`  heap before`.padEnd(56), `${before.toFixed(1)} MB`.padStart(10))
  console.log(
    `  heap with ${keysHeld.toLocaleString("en")} keys`.padEnd(56),
    `${full.toFixed(1)} MB`.padStart(10),
    ` (${((full - before) * 1024 * 1024 / keysHeld).toFixed(0)} B/key)`
  )
  console.log(
    `  heap after eviction (${memory.unsafeSize()} keys left, sweep ${sweepMs.toFixed(0)} ms)`.padEnd(56),
    `${after.toFixed(1)} MB`.padStart(10),
    ` (${after - before <= 1 ? "back to baseline" : `+${(after - before).toFixed(1)} MB`})`
  )
}
