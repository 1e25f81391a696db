// One process, one run: the success-path cost of Deadline.timeout, Retry.retry and breaker.protect (the built dist/)
// against Effect 4's own Effect.timeout, Effect.retry and effect/persistence CircuitBreaker (memory store), each combinator built once and applied per call (as the root's
// bench/core.ts does). Each case is run `ops` times in one fiber per round (the root bench harness's loop), rounds
// interleaved across cases, the median taken. Issue targets: <= 0.5x each; the breaker <= 0.1x.
import { Effect, Exit, Schedule, Scope } from "effect"
import { CircuitBreaker as Persisted } from "effect/persistence"
import { createRequire } from "node:module"
import * as CircuitBreakerPersistence from "../dist/CircuitBreaker/Persistence.js"
import { Backoff, CircuitBreaker, Deadline, RateLimiter, RateLimiterStore, Retry } from "../dist/index.js"
// cockatiel is a dependency of the repository root (the Effect 3 bench's reference), not of this package: its
// CommonJS build, by path (its ESM build has extensionless imports Node cannot resolve)
const {
  circuitBreaker,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleAll,
  retry: cockatielRetry,
  timeout: cockatielTimeout,
  TimeoutStrategy,
  wrap
} = createRequire(import.meta.url)("../../../node_modules/cockatiel")

const ops = 20_000
const rounds = 9
const ok = Effect.succeed(1)
// typed as retryable in TypeScript; at run time the same succeeding effect
const classified = ok
const backoff = Backoff.exponential({ base: "100 millis", cap: "10 seconds" })
const retry = Retry.retry({ schedule: backoff, maxAttempts: 4 })
const effectTimeout = Effect.timeout("1 second")
const deadlineTimeout = Deadline.timeout("1 second")
const effectRetry = Effect.retry(Schedule.recurs(3))
const effectRetryBackoff = Effect.retry({ schedule: backoff, times: 3 })
// the breakers live in one scope for the whole run; a closed breaker on the success path
const scope = Effect.runSync(Scope.make())
const inScope = (effect) => Effect.runPromise(Scope.provide(scope)(effect))
const breaker = await inScope(CircuitBreaker.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }))
const effectBreaker = await inScope(
  Persisted.make({ tripPolicy: Persisted.consecutive(5), openDuration: "10 seconds" }).pipe(
    Effect.provide(Persisted.layerStoreMemory())
  )
)
const bridge = await inScope(
  CircuitBreakerPersistence.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" })
)
const key = { key: "bench" }
// the full client-side pipeline on a succeeding call, as the root's bench/pipeline.ts builds it (issue 21 item 6):
// Retry.retry(limiter.tryAcquire *> breaker.protect(Deadline.timeout(call))); cockatiel has no limiter
const limiter = await inScope(
  RateLimiter.tokenBucket({ capacity: 1_000_000_000, refillPerSecond: 1_000_000_000 }).pipe(
    Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory())
  )
)
const pipelineRetry = Retry.retry({
  schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }),
  maxAttempts: 3
})
const pipeline = () => pipelineRetry(Effect.andThen(limiter.tryAcquire("origin"), breaker.protect(deadlineTimeout(ok))))
const cockatielPolicy = wrap(
  cockatielRetry(handleAll, { maxAttempts: 2, backoff: new ExponentialBackoff() }),
  circuitBreaker(handleAll, { halfOpenAfter: 10_000, breaker: new ConsecutiveBreaker(5) }),
  cockatielTimeout(1_000, TimeoutStrategy.Aggressive)
)

const cases = {
  "Effect.succeed (baseline)": () => ok,
  "Effect.timeout(1 second)": () => effectTimeout(ok),
  "Deadline.timeout(1 second)": () => deadlineTimeout(ok),
  "Effect.retry(Schedule.recurs(3))": () => effectRetry(ok),
  "Effect.retry(Backoff.exponential, times 3)": () => effectRetryBackoff(ok),
  "Retry.retry(Backoff.exponential, maxAttempts 4)": () => retry(classified),
  "breaker.protect (consecutive(5), closed)": () => breaker.protect(ok),
  "effect/persistence CircuitBreaker.execute (memory)": () => effectBreaker.execute(ok, key),
  "CircuitBreaker/Persistence execute (our keyed)": () => bridge.execute(ok, key),
  "pipeline (effect-resilience)": pipeline
}
/** Measured natively, per awaited call, in the same interleaved rounds. */
const promiseCases = {
  "pipeline (cockatiel)": (i) => cockatielPolicy.execute(() => Promise.resolve(i))
}

const loop = (make, n) =>
  Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* Effect.exit(make())
  })

const promiseLoop = async (call, n) => {
  for (let i = 0; i < n; i++) await call(i)
}
const samples = Object.fromEntries([...Object.keys(cases), ...Object.keys(promiseCases)].map((name) => [name, []]))
for (const make of Object.values(cases)) await Effect.runPromise(loop(make, 2_000)) // warm-up
for (const call of Object.values(promiseCases)) await promiseLoop(call, 2_000)
for (let r = 0; r < rounds; r++) {
  for (const [name, make] of Object.entries(cases)) {
    const start = process.hrtime.bigint()
    await Effect.runPromise(loop(make, ops))
    samples[name].push(Number(process.hrtime.bigint() - start) / ops)
  }
  for (const [name, call] of Object.entries(promiseCases)) {
    const start = process.hrtime.bigint()
    await promiseLoop(call, ops)
    samples[name].push(Number(process.hrtime.bigint() - start) / ops)
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const ns = Object.fromEntries(Object.entries(samples).map(([name, xs]) => [name, median(xs)]))
for (const [name, value] of Object.entries(ns)) console.log(`${name.padEnd(50)} ${value.toFixed(0).padStart(6)} ns/op`)

const base = ns["Effect.succeed (baseline)"]
const ratio = (ours, theirs) => {
  const whole = ns[ours] / ns[theirs]
  const overhead = (ns[ours] - base) / (ns[theirs] - base)
  return `${whole.toFixed(2)}x per call, ${overhead.toFixed(2)}x of the overhead over Effect.succeed`
}
console.log(`\nDeadline.timeout / Effect.timeout: ${ratio("Deadline.timeout(1 second)", "Effect.timeout(1 second)")}`)
console.log(
  `Retry.retry / Effect.retry (same schedule): ${
    ratio("Retry.retry(Backoff.exponential, maxAttempts 4)", "Effect.retry(Backoff.exponential, times 3)")
  }`
)
console.log(
  `Retry.retry / Effect.retry(Schedule.recurs(3)): ${
    ratio("Retry.retry(Backoff.exponential, maxAttempts 4)", "Effect.retry(Schedule.recurs(3))")
  }`
)
console.log(
  `breaker.protect / effect/persistence CircuitBreaker.execute: ${
    ratio("breaker.protect (consecutive(5), closed)", "effect/persistence CircuitBreaker.execute (memory)")
  }`
)
console.log(
  `CircuitBreaker/Persistence execute / effect/persistence execute: ${
    ratio("CircuitBreaker/Persistence execute (our keyed)", "effect/persistence CircuitBreaker.execute (memory)")
  }`
)
// against a promise library: whole per-call costs (the root bench's "absolute" targets)
const pipelineRatio = ns["pipeline (effect-resilience)"] / ns["pipeline (cockatiel)"]
console.log(
  `pipeline (timeout + retry + breaker + limiter) / cockatiel wrap(retry, breaker, timeout): ${
    pipelineRatio.toFixed(2)
  }x per call (target <= 0.15x) ${pipelineRatio <= 0.15 ? "ok" : "MISSED"}`
)
await Effect.runPromise(Scope.close(scope, Exit.void))
