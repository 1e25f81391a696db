import { Effect, Scope } from "effect"
import { Backoff, CircuitBreaker, Deadline, RateLimiter, RateLimiterStore, Retry } from "/work/main/packages/effect4/dist/index.js"
const ok = Effect.succeed(1)
const scope = Effect.runSync(Scope.make())
const inScope = (effect) => Effect.runPromise(Scope.provide(scope)(effect))
const breaker = await inScope(CircuitBreaker.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }))
const limiter = await inScope(RateLimiter.tokenBucket({ capacity: 1e9, refillPerSecond: 1e9 }).pipe(Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory())))
const retry = Retry.retry({ schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }), maxAttempts: 3 })
const dt = Deadline.timeout("1 second")
const which = process.argv[2] ?? "pipeline"
const make = {
  pipeline: () => retry(Effect.andThen(limiter.tryAcquire("origin"), breaker.protect(dt(ok)))),
  deadline: () => dt(ok), breaker: () => breaker.protect(ok), limiter: () => limiter.tryAcquire("origin"), retry: () => retry(ok)
}[which]
const loop = (n) => Effect.gen(function*() { for (let i = 0; i < n; i++) yield* Effect.exit(make()) })
for (let k = 0; k < 20; k++) await Effect.runPromise(loop(50_000))
