import { Effect, Exit, Scope } from "effect"
import { Backoff, CircuitBreaker, Deadline, RateLimiter, RateLimiterStore, Retry } from "/work/main/packages/effect4/dist/index.js"
const ops = 20_000, rounds = 9
const ok = Effect.succeed(1)
const scope = Effect.runSync(Scope.make())
const inScope = (effect) => Effect.runPromise(Scope.provide(scope)(effect))
const breaker = await inScope(CircuitBreaker.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }))
const limiter = await inScope(RateLimiter.tokenBucket({ capacity: 1e9, refillPerSecond: 1e9 }).pipe(Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory())))
const retry = Retry.retry({ schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }), maxAttempts: 3 })
const dt = Deadline.timeout("1 second")
const cases = {
  base: () => ok,
  deadline: () => dt(ok),
  retry: () => retry(ok),
  breaker: () => breaker.protect(ok),
  limiter: () => limiter.tryAcquire("origin"),
  "limiter+ok": () => Effect.andThen(limiter.tryAcquire("origin"), ok),
  "breaker(deadline)": () => breaker.protect(dt(ok)),
  "retry(breaker(deadline))": () => retry(breaker.protect(dt(ok))),
  pipeline: () => retry(Effect.andThen(limiter.tryAcquire("origin"), breaker.protect(dt(ok)))),
}
const loop = (make, n) => Effect.gen(function*() { for (let i = 0; i < n; i++) yield* Effect.exit(make()) })
const samples = Object.fromEntries(Object.keys(cases).map((n) => [n, []]))
for (const make of Object.values(cases)) await Effect.runPromise(loop(make, 2000))
for (let r = 0; r < rounds; r++) for (const [name, make] of Object.entries(cases)) {
  const s = process.hrtime.bigint(); await Effect.runPromise(loop(make, ops)); samples[name].push(Number(process.hrtime.bigint() - s) / ops)
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
for (const [n, xs] of Object.entries(samples)) console.log(n.padEnd(30), median(xs).toFixed(0))
