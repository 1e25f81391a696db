// One process, one run: the success-path cost of Deadline.timeout, Retry.retry and breaker.protect (the built dist/)
// against Effect 4's own Effect.timeout, Effect.retry and effect/persistence CircuitBreaker (memory store), each combinator built once and applied per call (as the root's
// bench/core.ts does). Each case is run `ops` times in one fiber per round (the root bench harness's loop), rounds
// interleaved across cases, the median taken. Issue targets: <= 0.5x each; the breaker <= 0.1x.
import { Effect, Exit, Schedule, Scope } from "effect"
import { CircuitBreaker as Persisted } from "effect/persistence"
import * as CircuitBreakerPersistence from "../dist/CircuitBreaker/Persistence.js"
import { Backoff, CircuitBreaker, Deadline, Retry } from "../dist/index.js"

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

const cases = {
  "Effect.succeed (baseline)": () => ok,
  "Effect.timeout(1 second)": () => effectTimeout(ok),
  "Deadline.timeout(1 second)": () => deadlineTimeout(ok),
  "Effect.retry(Schedule.recurs(3))": () => effectRetry(ok),
  "Effect.retry(Backoff.exponential, times 3)": () => effectRetryBackoff(ok),
  "Retry.retry(Backoff.exponential, maxAttempts 4)": () => retry(classified),
  "breaker.protect (consecutive(5), closed)": () => breaker.protect(ok),
  "effect/persistence CircuitBreaker.execute (memory)": () => effectBreaker.execute(ok, key),
  "CircuitBreaker/Persistence execute (our keyed)": () => bridge.execute(ok, key)
}

const loop = (make, n) =>
  Effect.gen(function*() {
    for (let i = 0; i < n; i++) yield* Effect.exit(make())
  })

const samples = Object.fromEntries(Object.keys(cases).map((name) => [name, []]))
for (const make of Object.values(cases)) await Effect.runPromise(loop(make, 2_000)) // warm-up
for (let r = 0; r < rounds; r++) {
  for (const [name, make] of Object.entries(cases)) {
    const start = process.hrtime.bigint()
    await Effect.runPromise(loop(make, ops))
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
await Effect.runPromise(Scope.close(scope, Exit.void))
