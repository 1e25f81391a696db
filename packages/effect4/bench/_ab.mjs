import { Effect, Scope } from "effect"
const load = async (dir) => {
  const { Backoff, CircuitBreaker, Deadline, RateLimiter, RateLimiterStore, Retry } = await import(dir + "/dist/index.js")
  const ok = Effect.succeed(1)
  const scope = Effect.runSync(Scope.make())
  const inScope = (effect) => Effect.runPromise(Scope.provide(scope)(effect))
  const breaker = await inScope(CircuitBreaker.make({ trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }))
  const limiter = await inScope(RateLimiter.tokenBucket({ capacity: 1e9, refillPerSecond: 1e9 }).pipe(Effect.provideService(RateLimiterStore.RateLimiterStore, RateLimiterStore.unsafeMakeMemory())))
  const retry = Retry.retry({ schedule: Backoff.fullJitter({ base: "10 millis", cap: "1 second" }), maxAttempts: 3 })
  const dt = Deadline.timeout("1 second")
  return {
    deadline: () => dt(ok), retry: () => retry(ok), breaker: () => breaker.protect(ok), limiter: () => limiter.tryAcquire("origin"),
    pipeline: () => retry(Effect.andThen(limiter.tryAcquire("origin"), breaker.protect(dt(ok))))
  }
}
const A = await load("/tmp/oldwt/packages/effect4"), B = await load("/work/main/packages/effect4")
const ops = 20_000, rounds = +(process.argv[2] ?? 15)
const loop = (make, n) => Effect.gen(function*() { for (let i = 0; i < n; i++) yield* Effect.exit(make()) })
const names = Object.keys(A); const s = {}
for (const n of names) { s["old " + n] = []; s["new " + n] = []; await Effect.runPromise(loop(A[n], 3000)); await Effect.runPromise(loop(B[n], 3000)) }
for (let r = 0; r < rounds; r++) for (const n of names) for (const [tag, impl] of r % 2 ? [["old", A], ["new", B]] : [["new", B], ["old", A]]) {
  const t = process.cpuUsage(); await Effect.runPromise(loop(impl[n], ops)); const d = process.cpuUsage(t); s[tag + " " + n].push((d.user + d.system) * 1000 / ops)
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
for (const n of names) console.log(n.padEnd(10), "old", med(s["old " + n]).toFixed(0).padStart(5), "new", med(s["new " + n]).toFixed(0).padStart(5), "ratio", (med(s["new " + n]) / med(s["old " + n])).toFixed(2))
