import { Duration, Effect, TestClock, TestServices } from "effect"

/**
 * Waits until `condition` holds, for what real I/O makes true (a consumer draining a real queue, Redis
 * expiring a key): checks it, then sleeps `every` of real time (also under TestClock), and fails after
 * `within` of real time. The cap is generous on purpose: a slow, busy machine passes, a hang still fails.
 */
export const eventually = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  options: { readonly every?: Duration.DurationInput; readonly within?: Duration.DurationInput } = {}
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function*() {
    const every = TestServices.provideLive(Effect.sleep(options.every ?? "10 millis"))
    const cap = Duration.toMillis(options.within ?? "30 seconds")
    const started = performance.now()
    for (;;) {
      if (yield* condition) return
      if (performance.now() - started > cap) {
        return yield* Effect.fail(new Error(`the condition did not hold within ${cap} ms of real time`))
      }
      yield* every
    }
  })

/**
 * Waits until at least `n` fibers sleep on the TestClock — e.g. a forked call that sleeps only after a
 * store answered over the network — yielding to I/O between checks and never moving any clock. Moving
 * the TestClock before a fiber sleeps would make it sleep from the later time.
 */
export const untilSleeping = (n = 1): Effect.Effect<void> =>
  Effect.gen(function*() {
    const started = performance.now()
    while ((yield* TestClock.sleeps()).length < n) {
      if (performance.now() - started > 30_000) {
        return yield* Effect.dieMessage(`fewer than ${n} fibers started sleeping on the TestClock within 30 s`)
      }
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
  })
