import { Chunk, Duration, Effect, TestClock, TestServices } from "effect"

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

/** How many fibers sleep on the TestClock until `wakeAt` (TestClock millis). */
const sleepersAt = (wakeAt: number) =>
  Effect.map(TestClock.sleeps(), (sleeps) => Chunk.filter(sleeps, (at) => at === wakeAt).length)

/**
 * Waits until at least `n` fibers sleep on the TestClock until `wakeAt` (TestClock millis) — e.g. a forked
 * call that sleeps only after a store answered over the network — yielding to I/O between checks and
 * never moving any clock. Moved before a fiber sleeps, the clock would make it sleep from the later time.
 */
export const untilSleeping = (wakeAt: number, n = 1): Effect.Effect<void> =>
  Effect.gen(function*() {
    const started = performance.now()
    while ((yield* sleepersAt(wakeAt)) < n) {
      if (performance.now() - started > 30_000) {
        return yield* Effect.dieMessage(`fewer than ${n} fibers started sleeping until ${wakeAt} within 30 s`)
      }
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
  })

/**
 * Forks `effect` and waits until one more fiber sleeps on the TestClock until `wakeAt` than before: the
 * sleepers counted before include the timers of interrupted fibers, which TestClock keeps.
 */
export const forkUntilSleeping = <A, E, R>(effect: Effect.Effect<A, E, R>, wakeAt: number) =>
  Effect.gen(function*() {
    const before = yield* sleepersAt(wakeAt)
    const fiber = yield* Effect.fork(effect)
    yield* untilSleeping(wakeAt, before + 1)
    return fiber
  })
